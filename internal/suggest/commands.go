package suggest

import "fmt"

// UnknownCommand words a command that path (a command's path, "syncd
// state") does not have: the closest of its commands (names), or where
// they are listed.
func UnknownCommand(typed, path string, names []string) string {
	msg := fmt.Sprintf("unknown command %q for %q", typed, path)
	if close := Closest(typed, names, 1); len(close) > 0 {
		return msg + fmt.Sprintf(": did you mean %s?", close[0])
	}
	return msg + fmt.Sprintf(": `%s --help` lists its commands", path)
}

// UnknownFlag words the flag name that the command of path does not have
// (msg is the parser's error): the closest of its flags (names), or where
// they are listed.
func UnknownFlag(msg, name, path string, names []string) string {
	if close := Closest(name, names, 1); len(close) > 0 {
		return fmt.Sprintf("%s: did you mean --%s?", msg, close[0])
	}
	return fmt.Sprintf("%s: `%s --help` lists its flags", msg, path)
}
