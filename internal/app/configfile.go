package app

import (
	"fmt"
	"os"

	"github.com/syncd-dev/syncd/internal/config"
)

// LocalConfig is the configuration file read from the working folder when
// neither --config nor SYNCD_CONFIG names one.
const LocalConfig = "syncd.yaml"

// LoadConfig reads the configuration file given (--config or
// SYNCD_CONFIG); none given, ./syncd.yaml when there is one. path is the
// file read: "" when there was none, and cfg is the built-in defaults.
func LoadConfig(given string, lookupEnv func(string) (string, bool)) (cfg *config.Config, path string, err error) {
	path = given
	if path == "" {
		// As terraform reads the folder it runs in: ./syncd.yaml when
		// there is one; the built-in defaults otherwise, said out loud
		// (and refused by the commands that write: ErrNoConfig).
		if fi, err := os.Stat(LocalConfig); err == nil && fi.Mode().IsRegular() {
			path = LocalConfig
		}
	}
	cfg, err = config.Load(path, lookupEnv)
	return cfg, path, err
}

// ConfigNote is the line that says which configuration is used when none
// was given: "" when one was (given), or none is needed.
func ConfigNote(given, path string, cfg *config.Config) string {
	switch {
	case given != "":
		return ""
	case path != "":
		return fmt.Sprintf("syncd: no --config given: using ./%s\n", LocalConfig)
	default:
		return fmt.Sprintf("syncd: no configuration file (no --config, SYNCD_CONFIG or ./%s): using the built-in defaults: %s\n", LocalConfig, DefaultsText(cfg))
	}
}

// DefaultsText says where the built-in defaults read and write.
func DefaultsText(cfg *config.Config) string {
	where := "state " + StateWhere(cfg)
	if FilesOutput(cfg) {
		where += ", Parquet output under " + cfg.Sink.Parquet.Path
	}
	return "the Forms API at " + cfg.Source.BaseURL + ", " + where
}

// ErrNoConfig refuses a command that writes (a pass, a backfill, a change
// to the state) when no configuration file was found.
func ErrNoConfig(cfg *config.Config) error {
	return fmt.Errorf("no configuration file: give --config FILE (or set SYNCD_CONFIG, or put a %s in this folder; configs/syncd.example.yaml is one to start from); "+
		"without one this command would sync with the built-in defaults (%s); nothing was written", LocalConfig, DefaultsText(cfg))
}
