//go:build testsource

package app

import (
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/source/memsource"
)

// testSources adds the test-only source to the list, in a build with the
// testsource tag (test/e2e/testsource_test.go builds syncd so).
func testSources() []source.Source { return []source.Source{memsource.Source{}} }
