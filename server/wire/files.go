package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// InputFiles are the files a request creates, by path. In JSON each is a
// base64 string (as []byte marshals), {"text": "..."} for UTF-8 text as
// it is, or {"base64": "..."}: clients write text without encoding it,
// and a value that is neither says which file and what was expected.
type InputFiles map[string][]byte

// UnmarshalJSON reads the three forms; an error names the file.
func (f *InputFiles) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("files: want an object of path: content, %w", err)
	}
	if raw == nil {
		*f = nil
		return nil
	}
	out := make(InputFiles, len(raw))
	// In path order, so that the same bad request names the same file.
	for _, path := range slices.Sorted(maps.Keys(raw)) {
		content, err := decodeFile(raw[path])
		if err != nil {
			return fmt.Errorf("files[%q]: %w", path, err)
		}
		out[path] = content
	}
	*f = out
	return nil
}

const fileForms = `want a base64 string, {"text": "..."} or {"base64": "..."}`

func decodeFile(v json.RawMessage) ([]byte, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) > 0 && v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%s (a string is base64: %w)", fileForms, err)
		}
		return b, nil
	case len(v) > 0 && v[0] == '{':
		var o struct {
			Text   *string `json:"text"`
			Base64 *string `json:"base64"`
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("%s: %w", fileForms, err)
		}
		switch {
		case o.Text != nil && o.Base64 == nil:
			return []byte(*o.Text), nil
		case o.Base64 != nil && o.Text == nil:
			b, err := base64.StdEncoding.DecodeString(*o.Base64)
			if err != nil {
				return nil, fmt.Errorf("base64: %w", err)
			}
			return b, nil
		}
		return nil, fmt.Errorf(`%s: exactly one of "text" and "base64"`, fileForms)
	}
	return nil, fmt.Errorf("%s, got %.20s", fileForms, v)
}
