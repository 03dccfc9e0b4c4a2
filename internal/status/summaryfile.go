package status

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/syncd-dev/syncd/internal/poller"
)

// WriteSummary writes the summary of a pass's results (Summarize) to the
// file at path, as indented JSON.
func WriteSummary(path string, results []poller.Result, signalled bool) error {
	b, err := json.MarshalIndent(Summarize(results, signalled), "", "  ")
	if err != nil {
		return fmt.Errorf("encode the summary: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the summary to %s: %w", path, err)
	}
	return nil
}
