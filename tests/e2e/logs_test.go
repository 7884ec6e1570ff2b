package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestJSONLogs: with log.format = "json" every line the frontend and the
// worker write is one JSON object, and the frontend's "request served"
// line of a request carries the request id it answered with.
func TestJSONLogs(t *testing.T) {
	ca := startCA(t, testdb.SQLite(t), "[log]\nformat = \"json\"\n")
	resp, err := ca.HTTPClient().Get(ca.BaseURL + "/directory")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("GET /directory: %d, X-Request-Id %q", resp.StatusCode, id)
	}
	var served map[string]any
	for deadline := time.Now().Add(10 * time.Second); served == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, line := range jsonLines(t, ca.Log("frontend")) {
			if line["msg"] == "request served" && line["request_id"] == id {
				served = line
			}
		}
	}
	if served == nil {
		t.Fatalf("no \"request served\" line with request_id %s in the frontend's log:\n%s", id, ca.Log("frontend"))
	}
	if served["route"] != "directory" || served["status"] != float64(200) || served["process"] != "frontend" {
		t.Errorf("request served line %v: want route directory, status 200, process frontend", served)
	}
	if len(jsonLines(t, ca.Log("worker"))) == 0 {
		t.Error("the worker wrote no JSON lines")
	}
}

// jsonLines parses every line of log as a JSON object, failing on any
// that is not one.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON (%v): %q", err, l)
		}
		out = append(out, m)
	}
	return out
}
