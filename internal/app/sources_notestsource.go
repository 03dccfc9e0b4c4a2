//go:build !testsource

package app

import "github.com/syncd-dev/syncd/internal/source"

// testSources are none in a build without the testsource tag.
func testSources() []source.Source { return nil }
