package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is a configuration problem: it names the file, the key and the line.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Load reads the file at path (or, when path is empty, only the defaults and
// the environment), expands ${ENV} references in values and validates.
// lookupEnv is os.LookupEnv in production and a map in tests.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	cfg := Defaults()
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if err := decode(path, raw, &cfg, lookupEnv); err != nil {
			return nil, err
		}
	}
	cfg.setSectionDefaults()
	if err := cfg.expandSecrets(path, lookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.validate(path); err != nil {
		return nil, err
	}
	if path != "" {
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return nil, fmt.Errorf("resolve the folder of config %s: %w", path, err)
		}
		cfg.resolvePaths(dir)
	}
	return &cfg, nil
}

// resolvePaths makes the relative local paths of a configuration loaded from
// a file (the state file, the Parquet folder, the spool folder, the Iceberg
// warehouse and sqlite catalog; defaults included) relative to the file's folder, not to the working directory: two
// runs of one config from two folders must share one state, or the second
// writes every row a second time into the same output.
func (c *Config) resolvePaths(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if c.State.URL == "" {
		c.State.Path = abs(c.State.Path)
	}
	if !strings.Contains(c.Sink.Parquet.Path, "://") {
		c.Sink.Parquet.Path = abs(c.Sink.Parquet.Path)
	}
	c.Sync.SpoolDir = abs(c.Sync.SpoolDir)
	if ic := c.Sink.Iceberg; ic != nil {
		if !strings.Contains(ic.Warehouse, "://") {
			ic.Warehouse = abs(ic.Warehouse)
		}
		// The sqlite catalog's file (its default, beside the state, was
		// made from the state's path before it was resolved).
		if ic.Catalog.Type == "sqlite" && !strings.Contains(ic.Catalog.URI, "://") {
			ic.Catalog.URI = abs(ic.Catalog.URI)
		}
	}
	for i := range c.Accounts {
		c.Accounts[i].APIKeyFile = abs(c.Accounts[i].APIKeyFile)
	}
}

// Parse is Load for a configuration held in memory (tests, fuzzing).
func Parse(name string, raw []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	cfg := Defaults()
	if err := decode(name, raw, &cfg, lookupEnv); err != nil {
		return nil, err
	}
	cfg.setSectionDefaults()
	if err := cfg.expandSecrets(name, lookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.validate(name); err != nil {
		return nil, err
	}
	return &cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expand replaces ${VAR} and ${VAR:-default} in s. A missing variable without
// a default is an error, so a typo never silently becomes "".
func expand(s string, lookupEnv func(string) (string, bool)) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		if v, ok := lookupEnv(sub[1]); ok {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set: export it or set a default with ${%s:-value}", missing[0], missing[0])
	}
	return out, nil
}

// secretKeys are the keys of type Secret (accounts[].api_key for every
// account's): expandNode leaves them alone, and expandSecrets expands them
// after decoding, so that their values never reach a YAML error and are
// expanded once (a value holding "${" stays as it is).
var secretKeys = keysOfType(reflect.TypeOf(Secret("")))

// listIndex is the index of a list item in a dotted key (forms[0]).
var listIndex = regexp.MustCompile(`\[\d+\]`)

func isSecretKey(path string) bool { return secretKeys[listIndex.ReplaceAllString(path, "[]")] }

// expandSecrets expands ${ENV} in every secret; an unset variable is an
// error naming the key and its line. With an accounts list, source.api_key
// is not used: its default (${FORMS_API_KEY}) must not be required.
func (c *Config) expandSecrets(file string, lookupEnv func(string) (string, bool)) error {
	type secret struct {
		key string
		v   *Secret
	}
	var secrets []secret
	if len(c.Accounts) == 0 {
		secrets = append(secrets, secret{"source.api_key", &c.Source.APIKey})
	}
	secrets = append(secrets, secret{"server.connect_secret", &c.Server.ConnectSecret}, secret{"sync.webhooks.secret", &c.Sync.Webhooks.Secret})
	for i := range c.Accounts {
		secrets = append(secrets, secret{fmt.Sprintf("accounts[%d].api_key", i), &c.Accounts[i].APIKey})
	}
	if s := c.Scheduling; s != nil {
		secrets = append(secrets, secret{"scheduling.client_secret", &s.ClientSecret}, secret{"scheduling.client_secret_next", &s.ClientSecretNext})
	}
	if f := c.FormsOAuth; f != nil {
		secrets = append(secrets, secret{"forms_oauth.client_secret", &f.ClientSecret})
	}
	for _, s := range secrets {
		if name, ok := bareVariable(string(*s.v)); ok {
			return &Error{File: file, Line: c.lines[s.key], Key: s.key, Msg: fmt.Sprintf("$%s would be taken literally: only ${VAR} is read from the environment; write \"${%s}\"", name, name)}
		}
		v, err := expandSecret(*s.v, lookupEnv)
		if err != nil {
			return &Error{File: file, Line: c.lines[s.key], Key: s.key, Msg: err.Error()}
		}
		*s.v = v
	}
	return nil
}

var bareVar = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)

// bareVariable reports whether s is a shell-style $VAR, which the config
// does not expand (only ${VAR}), and names the variable.
func bareVariable(s string) (string, bool) {
	m := bareVar.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", false
	}
	return m[1], true
}

func expandSecret(s Secret, lookupEnv func(string) (string, bool)) (Secret, error) {
	v, err := expand(string(s), lookupEnv)
	return Secret(v), err
}

func decode(name string, raw []byte, cfg *Config, lookupEnv func(string) (string, bool)) (err error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file is all defaults
		}
		return &Error{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if err := checkKeys(name, root, reflect.TypeOf(*cfg), ""); err != nil {
		return err
	}
	if err := expandNode(name, root, "", lookupEnv); err != nil {
		return err
	}
	cfg.lines = map[string]int{}
	keyLines(root, "", cfg.lines)
	if err := root.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			// yaml names the line, not the key: name it too, as every other
			// config error does.
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = nameKey(root, m)
			}
			return &Error{File: name, Msg: strings.Join(msgs, "; ")}
		}
		return &Error{File: name, Msg: nameKey(root, err.Error())}
	}
	return nil
}

// expandNode expands ${ENV} in every scalar value except the secrets, which
// expandSecrets expands after decoding so that their values never reach a
// YAML error.
func expandNode(file string, n *yaml.Node, path string, lookupEnv func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expandNode(file, n.Content[i+1], join(path, n.Content[i].Value), lookupEnv); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandNode(file, c, fmt.Sprintf("%s[%d]", path, i), lookupEnv); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if isSecretKey(path) || !strings.Contains(n.Value, "${") {
			return nil
		}
		v, err := expand(n.Value, lookupEnv)
		if err != nil {
			return &Error{File: file, Line: n.Line, Key: path, Msg: err.Error()}
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = "" // let YAML resolve the expanded text's type (numbers, bools)
		}
	}
	return nil
}

// keyLines records the line of every key under n, by dotted path.
func keyLines(n *yaml.Node, path string, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			lines[p] = n.Content[i].Line
			keyLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			keyLines(c, p, lines)
		}
	}
}

// Line is the line of a dotted key in the file, or 0 when the file does
// not set it.
func (c *Config) Line(key string) int { return c.lines[key] }

// nameKey adds the key to a decoding message that names only its line
// ("line 2: ..." becomes "line 2: sync.jitter: ...").
func nameKey(root *yaml.Node, msg string) string {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil {
		return msg
	}
	msg = plainTypeError(msg)
	key := keyAtLine(root, "", line)
	if key == "" {
		return msg
	}
	return strings.Replace(msg, fmt.Sprintf("line %d:", line), fmt.Sprintf("line %d: %s:", line, key), 1)
}

var yamlTypeError = regexp.MustCompile("cannot unmarshal !!\\w+ (`[^`]*`) into (\\w+)")

// plainTypeError says yaml's "cannot unmarshal !!str `fast` into float64"
// in words: "`fast` is not a number".
func plainTypeError(msg string) string {
	return yamlTypeError.ReplaceAllStringFunc(msg, func(m string) string {
		sub := yamlTypeError.FindStringSubmatch(m)
		switch t := sub[2]; {
		case strings.HasPrefix(t, "float"):
			return sub[1] + " is not a number: write one, such as 5 or 0.5"
		case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
			return sub[1] + " is not a whole number: write one, such as 8"
		case t == "bool":
			return sub[1] + " is not true or false"
		}
		return m
	})
}

// keyAtLine is the dotted key whose value starts on line, or "".
func keyAtLine(n *yaml.Node, path string, line int) string {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if v.Kind == yaml.ScalarNode && v.Line == line {
				return p
			}
			if found := keyAtLine(v, p, line); found != "" {
				return found
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if c.Kind == yaml.ScalarNode && c.Line == line {
				return p
			}
			if found := keyAtLine(c, p, line); found != "" {
				return found
			}
		}
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys rejects keys that do not exist in the configuration structure,
// naming the key, its line and the keys that would be valid there.
func checkKeys(file string, n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			return nil
		}
		if t.Kind() != reflect.Struct {
			return nil // a scalar type given a mapping: Decode reports it with its line
		}
		fields := map[string]reflect.Type{}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = f.Type
			names = append(names, tag)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok && path == "" && k.Value == "webhook" {
				return &Error{File: file, Line: k.Line, Key: "webhook",
					Msg: "syncd never used this key and no longer accepts it: remove the webhook section (webhooks are configured under sync.webhooks, see the README)"}
			}
			if !ok {
				where := "at the top level"
				if path != "" {
					where = "under " + path
				}
				return &Error{File: file, Line: k.Line, Key: join(path, k.Value),
					Msg: fmt.Sprintf("unknown key %s: valid keys are %s", where, strings.Join(names, ", "))}
			}
			if err := checkKeys(file, n.Content[i+1], ft, join(path, k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice {
			for i, c := range n.Content {
				if err := checkKeys(file, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
