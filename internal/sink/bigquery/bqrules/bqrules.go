// Package bqrules holds BigQuery's own rules that syncd checks twice: when
// the configuration is validated (internal/config, which must not pull in
// the BigQuery client) and when the sink opens (internal/sink/bigquery).
// Written once here, the two checks cannot drift apart.
package bqrules

import (
	"fmt"
	"strings"
)

// MaxClustering is BigQuery's limit on a table's clustering columns.
const MaxClustering = 4

// maxDatasetID is the longest dataset id BigQuery takes.
const maxDatasetID = 1024

func datasetIDRune(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// DatasetIDProblem says what is wrong with a dataset id, with the fix, or
// "" when BigQuery takes it.
func DatasetIDProblem(id string) string {
	if len(id) > maxDatasetID {
		return fmt.Sprintf("is %d characters long: a BigQuery dataset id has at most %d (letters, digits and underscores)", len(id), maxDatasetID)
	}
	if id == "" || strings.IndexFunc(id, func(r rune) bool { return !datasetIDRune(r) }) >= 0 {
		fixed := strings.Map(func(r rune) rune {
			if datasetIDRune(r) {
				return r
			}
			return '_'
		}, id)
		return fmt.Sprintf("%q is not a BigQuery dataset id: use letters, digits and underscores only (at most %d), e.g. %s", id, maxDatasetID, fixed)
	}
	return ""
}
