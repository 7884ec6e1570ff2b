package process

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTuneGC: the frontend and worker collect at DefaultGOGC unless the
// operator set GOGC, whose value Go's runtime applied at start and
// TuneGC leaves alone.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	for _, tc := range []struct {
		name, env string
		want      int
	}{
		{"GOGC unset", "", DefaultGOGC},
		{"GOGC set by the operator", "150", 100}, // the runtime read it at start; here that is the 100 set above
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.env)
			debug.SetGCPercent(100)
			got := TuneGC()
			if cur := debug.SetGCPercent(100); cur != tc.want || got != tc.want {
				t.Errorf("TuneGC() = %d and the target is %d, want %d", got, cur, tc.want)
			}
		})
	}
}

// TestLogFormats: text and json lines both mask a database URL's password
// (redact.ReplaceAttr); json lines are JSON objects with a stable msg.
func TestLogFormats(t *testing.T) {
	for _, format := range []string{"", "text", "json"} {
		var b bytes.Buffer
		l := slog.New(Log{Format: format}.handler(&b, slog.LevelInfo))
		l.Info("request served", "url", "postgres://hallmark:s3cret-pw@db/hallmark")
		if strings.Contains(b.String(), "s3cret-pw") {
			t.Errorf("format %q leaks the password: %s", format, b.String())
		}
		var m map[string]any
		isJSON := json.Unmarshal(b.Bytes(), &m) == nil
		if isJSON != (format == "json") || (isJSON && m["msg"] != "request served") {
			t.Errorf("format %q wrote %s", format, b.String())
		}
	}
	if err := (Log{Format: "yaml"}).Validate(); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Errorf("log.format yaml: %v, want refused naming log.format", err)
	}
}
