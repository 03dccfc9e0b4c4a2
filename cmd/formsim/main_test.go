package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs the command with args until the test ends and returns the
// reader of its stdout, positioned after the base URL, and the base URL.
func serve(t *testing.T, args ...string) (*bufio.Reader, string) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), pw, io.Discard, func(string) string { return "" })
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr) // the command may still be printing
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("no shutdown")
		}
	})
	out := bufio.NewReader(pr)
	base, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("read the base URL: %v", err)
	}
	return out, strings.TrimSpace(base)
}

func get(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestAccounts(t *testing.T) {
	out, base := serve(t, "--accounts", "3", "--key-prefix", "sk_t_", "--seed", "10", "--forms", "2", "--submissions", "5")
	if !strings.HasSuffix(base, "/v1/api") {
		t.Fatalf("base URL %q", base)
	}
	// Read every line first: the command serves once it has printed them.
	lines := make([]string, 3)
	for i := range lines {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("account line %d: %v", i+1, err)
		}
		lines[i] = line
	}
	seenForms := map[string]string{}
	for i := 1; i <= 3; i++ {
		line := lines[i-1]
		f := strings.Fields(line)
		if len(f) != 9 || f[0] != "account" || f[2] != "key" || f[4] != "seed" || f[6] != "forms" {
			t.Fatalf("account line %q", line)
		}
		key := f[3]
		if want := fmt.Sprintf("account %d key sk_t_%d seed %d forms", i, i, 10+i-1); strings.Join(f[:7], " ") != want {
			t.Errorf("account line %q, want it to start %q", line, want)
		}
		status, body := get(t, base+"/forms", key)
		var forms []struct {
			FormID string `json:"formId"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &forms) != nil || len(forms) != 2 {
			t.Fatalf("GET /forms with %s: %d %s", key, status, body)
		}
		if forms[0].FormID != f[7] || forms[1].FormID != f[8] {
			t.Errorf("%s serves forms %v, the line says %v", key, forms, f[7:])
		}
		for _, fm := range forms {
			if other, ok := seenForms[fm.FormID]; ok {
				t.Errorf("form %s is served to %s and %s", fm.FormID, other, key)
			}
			seenForms[fm.FormID] = key
		}
	}
	if status, _ := get(t, base+"/forms", "sk_t_4"); status != http.StatusUnauthorized {
		t.Errorf("a key beyond the accounts: %d", status)
	}
}

func TestSingleAccountUnchanged(t *testing.T) {
	_, base := serve(t, "--api-key", "k", "--forms", "1", "--submissions", "2")
	if status, body := get(t, base+"/forms", "k"); status != http.StatusOK {
		t.Fatalf("GET /forms: %d %s", status, body)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no key", nil},
		{"negative accounts", []string{"--accounts", "-1"}},
		{"key and accounts", []string{"--accounts", "2", "--api-key", "k"}},
		{"empty prefix", []string{"--accounts", "2", "--key-prefix", ""}},
		{"drop rate over 1", []string{"--api-key", "k", "--webhook-drop-rate", "1.5"}},
		{"delays the wrong way", []string{"--api-key", "k", "--webhook-delay-min", "1s", "--webhook-delay-max", "1ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), tc.args, io.Discard, io.Discard, func(string) string { return "" })
			if err == nil {
				t.Fatal("run accepted the flags")
			}
		})
	}
}

// The webhook fault flags reach the simulator, and its admin endpoints
// show them.
func TestWebhookFlags(t *testing.T) {
	_, base := serve(t, "--api-key", "k", "--forms", "1", "--submissions", "2", "--webhook-drop-rate", "0.2",
		"--webhook-duplicate-rate", "0.1", "--webhook-delay-min", "5ms", "--webhook-delay-max", "1s", "--webhook-bare-rate", "0.5")
	root := strings.TrimSuffix(base, "/v1/api")
	status, body := get(t, root+"/_admin/webhook-faults", "")
	var f map[string]any
	if status != http.StatusOK || json.Unmarshal(body, &f) != nil {
		t.Fatalf("GET /_admin/webhook-faults: %d %s", status, body)
	}
	want := map[string]any{"drop_rate": 0.2, "duplicate_rate": 0.1, "delay_min": "5ms", "delay_max": "1s", "bare_rate": 0.5, "bad_signature_rate": 0.0}
	if fmt.Sprint(f) != fmt.Sprint(want) {
		t.Errorf("faults %v, want %v", f, want)
	}
}
