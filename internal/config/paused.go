package config

import "fmt"

// PausedForms are the forms an account both lists (accounts[].forms) and
// excludes (accounts[].exclude). Exclude wins, which pauses a listed form
// without losing its settings; but it may as well be a mistake, so
// validate shows each one. One sentence per form.
func (c *Config) PausedForms() []string {
	var out []string
	for i, a := range c.Accounts {
		excluded := make(map[string]bool, len(a.Exclude))
		for _, id := range a.Exclude {
			excluded[id] = true
		}
		for j, f := range a.Forms {
			if excluded[f.ID] {
				out = append(out, fmt.Sprintf("accounts[%d] (%s): form %s is in forms[%d] and in exclude, so it is not synced: remove it from exclude to sync it", i, a.Name, f.ID, j))
			}
		}
	}
	return out
}
