package redact

import (
	"fmt"
	"log/slog"
)

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that passes the message
// and every attribute's value through Text: strings, errors, and any other
// value as the text handler would print it (%+v).
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		if r := Text(s); r != s {
			a.Value = slog.StringValue(r)
		}
	case slog.KindAny:
		var s string
		if err, ok := a.Value.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprintf("%+v", a.Value.Any())
		}
		if r := Text(s); r != s {
			a.Value = slog.StringValue(r)
		}
	}
	return a
}
