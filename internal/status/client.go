package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// askTimeout bounds the wait for a running daemon's /status.
const askTimeout = 5 * time.Second

// DaemonURL is where a client on this host reaches the daemon's listener
// at addr: a wildcard host is asked on loopback.
func DaemonURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("server.addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// Ask reads the view from the daemon listening at addr (server.addr):
// GET /status with query ("?schema=1"). The view's Source is "daemon".
func Ask(ctx context.Context, addr, query string) (View, error) {
	u, err := DaemonURL(addr, "/status"+query)
	if err != nil {
		return View{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return View{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return View{}, fmt.Errorf("ask the running syncd at %s (server.addr): %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return View{}, fmt.Errorf("ask the running syncd at %s (server.addr): %s: %s", u, resp.Status, b)
	}
	var v View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return View{}, fmt.Errorf("read the answer of %s: %w", u, err)
	}
	v.Source = "daemon"
	return v, nil
}
