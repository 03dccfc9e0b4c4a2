package app

import "github.com/syncd-dev/syncd/internal/source"

// ListedSource is the listed source named name (sourceList, without the
// daemon's shared rate limits: a command's), nil when none is: the
// commands find a source's capabilities through it, and import no source.
func ListedSource(name string) source.Source { return findSource(sourceList(), name) }

// findSource is the source of list named name; nil when none is.
func findSource(list []source.Source, name string) source.Source {
	for _, s := range list {
		if s.Name() == name {
			return s
		}
	}
	return nil
}
