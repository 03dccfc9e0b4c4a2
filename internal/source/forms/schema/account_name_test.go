package schema

import (
	"os"
	"path/filepath"
	"testing"
)

// A named account's tables live under <path>/account=NAME/ (README,
// "Isolation"), a Hive key the README tells readers to use with
// hive_partitioning = true. A question named "Account" must therefore not
// get the column "account": DuckDB would put the folder's value in place of
// the answers, as it does for submission_date (TestQuestionNamedLikeAPartitionKey).
func TestQuestionNamedAccountUnderAccountFolder(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Account", "ShortAnswer")))
	col := tab.Sources[0].Column
	root, _, _ := writeParquet(t, tab, nil, sub("s1", ans("q1", "ShortAnswer", `"ACC-42"`)))
	// Move the table under the account folder, as the sink lays out a
	// named account's tables.
	acct := filepath.Join(root, "account=acme")
	if err := os.MkdirAll(acct, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "form_f1"), filepath.Join(acct, "form_f1")); err != nil {
		t.Fatal(err)
	}
	scan := "read_parquet('" + filepath.Join(root, "account=*", "form_f1", "**", "*.parquet") + "', hive_partitioning = true, union_by_name = true)"
	var got string
	if err := openDuck(t).QueryRow("SELECT " + col + " FROM " + scan).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "ACC-42" {
		t.Errorf("question \"Account\" has column %q; read as the README says, it holds %q, not the answer %q", col, got, "ACC-42")
	}
}
