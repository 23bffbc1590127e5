package geminifake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Google's JSON has two looks, and the fake writes both: complete answers indented with two
// spaces ("key": value, one member a line), stream events on one line with a space after each
// colon and none after commas: {"candidates": [{"content": {"parts": [...],"role": "model"}}]}.
// So values are built as ordered trees and rendered in either style.

// obj is a JSON object with its members in order.
type obj []member

type member struct {
	key string
	val any // obj, []any, string, int64, float32, bool, json.Number
}

// render appends v in Google's indented style (pretty) or its one-line stream style.
func render(b []byte, v any, pretty bool, indent string) []byte {
	switch v := v.(type) {
	case obj:
		if len(v) == 0 {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		inner := indent + "  "
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if pretty {
				b = append(b, '\n')
				b = append(b, inner...)
			}
			b = appendString(b, m.key)
			b = append(b, ": "...)
			b = render(b, m.val, pretty, inner)
		}
		if pretty {
			b = append(b, '\n')
			b = append(b, indent...)
		}
		return append(b, '}')
	case []any:
		if len(v) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		inner := indent + "  "
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if pretty {
				b = append(b, '\n')
				b = append(b, inner...)
			}
			b = render(b, e, pretty, inner)
		}
		if pretty {
			b = append(b, '\n')
			b = append(b, indent...)
		}
		return append(b, ']')
	case string:
		return appendString(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float32:
		return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	case bool:
		return strconv.AppendBool(b, v)
	case json.Number:
		return append(b, v...)
	case nil:
		return append(b, "null"...)
	}
	panic(fmt.Sprintf("geminifake: cannot render a %T", v)) // a bug in the fake
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// parseOrdered decodes JSON text into an ordered tree (objects keep their key order).
func parseOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return v, nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

const errTrailing = parseError("trailing data after the JSON value")

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := obj{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o = append(o, member{key: kt.(string), val: v})
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			return a, err
		}
	case string, json.Number, bool, nil:
		return t, nil
	}
	return nil, parseError("unexpected JSON token")
}
