package main

import (
	"embed"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Output formats of the commands that print tables: -o table|json, as
// kubectl spells it. JSON field names are snake_case and stable; the README
// lists them.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// addOutputFlag registers -o/--output on cmd, defaulting to a table.
func addOutputFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVarP(format, "output", "o", formatTable, "output format: table or json")
}

// checkFormat refuses an output format the command does not print.
func checkFormat(format string, allowed ...string) error {
	if len(allowed) == 0 {
		allowed = []string{formatTable, formatJSON}
	}
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return withCode(exitUsage, fmt.Errorf("-o %s: use one of %v", format, allowed))
}

// printJSON writes v as indented JSON and a newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return withCode(exitFailed, fmt.Errorf("encode JSON: %w", err))
	}
	return nil
}

// emit prints a command's view on stdout: v as JSON under -o json, text's
// rendering of it otherwise. It is the one place a command chooses between
// the two.
func (g *globals) emit(format string, v any, text func(w io.Writer) error) error {
	if format == formatJSON {
		return printJSON(g.stdout, v)
	}
	return text(g.stdout)
}

// noErr is a text form that writes without reporting errors, for emit.
func noErr(text func(w io.Writer)) func(w io.Writer) error {
	return func(w io.Writer) error { text(w); return nil }
}

// progressOut is where a command's progress lines go: stdout, or stderr
// under -o json, where stdout is the JSON alone.
func (g *globals) progressOut(format string) io.Writer {
	if format == formatJSON {
		return g.stderr
	}
	return g.stdout
}

// helpTexts are the commands' long descriptions and examples, one file
// each (help/<command>.long.txt, help/<command>.example.txt): text a
// person edits as text, beside the flags that stay in Go.
//
//go:embed help/*.txt
var helpTexts embed.FS

// help is the text of help/<name>.txt. A name without a file is a bug
// that the help's tests catch, so it panics rather than print nothing.
func help(name string) string {
	b, err := helpTexts.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic("cmd/syncd: no help text " + name + ": " + err.Error())
	}
	return string(b)
}
