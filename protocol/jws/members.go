package jws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// members splits a JSON object into its members, refusing anything but one
// object, and duplicate member names (RFC 7515 §5.2 lets a parser reject
// them; accepting them invites two parsers to disagree).
//
// The common case costs one json.Unmarshal and a count of the object's
// top-level members: a map with fewer keys than the object has members
// had a name twice. Anything else goes through membersExact, which says
// what is wrong; it alone was a third of Parse's time (BenchmarkParse).
func members(data []byte) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal(data, &out); err == nil && out != nil && topLevelMembers(data) == len(out) {
		return out, nil
	}
	return membersExact(data)
}

// topLevelMembers counts the members of data, a valid JSON object: the
// commas outside strings at depth one, plus one unless it is empty.
func topLevelMembers(data []byte) int {
	depth, commas, inString, escaped, empty := 0, 0, false, false, true
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			continue
		case c == '}' || c == ']':
			depth--
			continue
		case c == ',' && depth == 1:
			commas++
		}
		if depth == 1 && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			empty = false
		}
	}
	if empty {
		return 0
	}
	return commas + 1
}

// membersExact is members with a decoder that reads the object one member
// at a time, so its errors say what is wrong.
func membersExact(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	out := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON")
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("invalid JSON")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON")
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("member %q appears twice", name)
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON object")
	}
	return out, nil
}

// UniqueMembers refuses JSON in which one object, at any depth, has two
// members whose names are equal, or equal but for letter case: RFC 8259 §4
// leaves what a parser makes of them open, and encoding/json, which fills
// structs matching names without regard to case, keeps the last, so two
// parsers would read two different requests. It also refuses invalid JSON
// and anything after the first value. It reads data as a stream of tokens.
func UniqueMembers(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number too large for a float64 is still JSON
	var stack []*container
	for started := false; ; started = true {
		tok, err := dec.Token()
		if err == io.EOF && started && len(stack) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("invalid JSON")
		}
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			switch {
			case tok == json.Delim('}') || tok == json.Delim(']'):
				stack = stack[:len(stack)-1]
			case top.object && top.wantName:
				name, _ := tok.(string) // the decoder allows nothing else here
				if err := top.add(name); err != nil {
					return fmt.Errorf("%w%s", err, where(stack))
				}
				continue
			default:
				top.value()
			}
		}
		if tok == json.Delim('{') || tok == json.Delim('[') {
			stack = append(stack, &container{object: tok == json.Delim('{'), wantName: true, index: -1})
		}
		if len(stack) == 0 && dec.More() {
			return fmt.Errorf("unexpected data after the JSON value")
		}
	}
}

// container is an object or array UniqueMembers is inside.
type container struct {
	object   bool
	wantName bool              // object: the next string is a member name
	names    []string          // object: the names so far
	folded   map[string]string // object: names by foldName, once there are many
	name     string            // object: the member being read
	index    int               // array: the element being read
}

// manyNames is when an object's names are compared through a map rather
// than each with each.
const manyNames = 16

// add records a member name, refusing one the object already has.
func (c *container) add(name string) error {
	c.wantName, c.name = false, name
	if c.folded == nil && len(c.names) < manyNames {
		for _, n := range c.names {
			if strings.EqualFold(n, name) {
				return duplicate(n, name)
			}
		}
		c.names = append(c.names, name)
		return nil
	}
	if c.folded == nil {
		c.folded = make(map[string]string, 2*manyNames)
		for _, n := range c.names {
			c.folded[foldName(n)] = n
		}
	}
	f := foldName(name)
	if n, dup := c.folded[f]; dup {
		return duplicate(n, name)
	}
	c.folded[f] = name
	return nil
}

// value notes that a value (or a container holding one) starts in c.
func (c *container) value() {
	if c.object {
		c.wantName = true
	} else {
		c.index++
	}
}

func duplicate(first, second string) error {
	if first == second {
		return fmt.Errorf("member %q appears twice", first)
	}
	return fmt.Errorf("members %q and %q differ only in letter case", first, second)
}

// where names the object a duplicate is in, as a path of member names and
// array indexes ("" for the outermost object).
func where(stack []*container) string {
	var b strings.Builder
	for _, c := range stack[:len(stack)-1] {
		if c.object {
			b.WriteString("." + c.name)
		} else {
			b.WriteString("[" + strconv.Itoa(c.index) + "]")
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return " (in " + strings.TrimPrefix(b.String(), ".") + ")"
}

// foldName maps names strings.EqualFold calls equal to one string: each
// rune becomes the smallest of its case-folding orbit.
func foldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// uniqueWithin checks what members leaves to UniqueMembers: names of m
// equal but for letter case, and every object nested in its values. Names
// are taken in order, so the error names the same pair every time.
func uniqueWithin(m map[string]json.RawMessage) error {
	var buf [8]string // a header's or a JWS's few names, without allocating
	names := buf[:0]
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	c := container{object: true, names: make([]string, 0, len(buf))}
	for _, name := range names {
		if err := c.add(name); err != nil {
			return err
		}
		if v := m[name]; len(v) > 0 && (v[0] == '{' || v[0] == '[') {
			if err := UniqueMembers(v); err != nil {
				return fmt.Errorf("%q: %w", name, err)
			}
		}
	}
	return nil
}
