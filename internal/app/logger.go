package app

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/syncd-dev/syncd/internal/config"
)

// NewLogger is the log the configuration asks for, written to w: JSON
// lines when w is not a terminal and readable console lines when it is
// (terminal says which; format auto or empty).
func NewLogger(c config.Log, w io.Writer, terminal bool) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", c.Level)
	}
	format := c.Format
	if format == "auto" || format == "" {
		format = "json"
		if terminal {
			format = "console"
		}
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch format {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		if terminal { // colours for a person, never into a file or a pipe
			enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log format %q: use auto, json or console", c.Format)
	}
	core := zapcore.NewCore(encoder, zapcore.AddSync(w), level)
	return zap.New(core), nil
}
