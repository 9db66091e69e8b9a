package hostfuncs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// param is one argument of a struct In, in declaration order.
type param struct {
	Name     string `json:"name"`
	Type     string `json:"type"` // a Python type name for the signature hint, or ""
	Required bool   `json:"required"`
}

var (
	bytesType     = reflect.TypeFor[[]byte]()
	hfBytesType   = reflect.TypeFor[Bytes]()
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

// argSchema derives the arguments' JSON schema from In, and for a struct the
// parameter list.
func argSchema(t reflect.Type) (map[string]any, []param, error) {
	g := &schemaGen{seen: map[reflect.Type]bool{}}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == timeType {
		s, err := g.schema(t)
		if err != nil {
			return nil, nil, err
		}
		return map[string]any{"type": "array", "prefixItems": []any{s}, "minItems": 1, "maxItems": 1,
			"description": "exactly one positional argument"}, []param{{Name: "value", Type: pyType(s), Required: true}}, nil
	}
	fields := structFields(t)
	props := map[string]any{}
	required := []string{}
	params := make([]param, 0, len(fields))
	for _, f := range fields {
		s, err := g.schema(f.typ)
		if err != nil {
			return nil, nil, fmt.Errorf("field %s: %w", f.name, err)
		}
		props[f.name] = s
		if f.required {
			required = append(required, f.name)
		}
		params = append(params, param{Name: f.name, Type: pyType(s), Required: f.required})
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}, params, nil
}

type field struct {
	name     string
	typ      reflect.Type
	required bool
}

// structFields lists the fields encoding/json would use, by JSON name, in
// declaration order (promoted fields of untagged embedded structs included).
func structFields(t reflect.Type) []field {
	var out []field
	seen := map[string]bool{}
	for _, sf := range reflect.VisibleFields(t) {
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				continue // its fields are visited themselves
			}
		}
		if name == "" {
			name = sf.Name
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		optional := sf.Type.Kind() == reflect.Pointer
		for _, o := range strings.Split(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				optional = true
			}
		}
		out = append(out, field{name: name, typ: sf.Type, required: !optional})
	}
	return out
}

type schemaGen struct{ seen map[reflect.Type]bool }

// schema covers basic kinds, slices, arrays, maps with string-like keys,
// nested structs and pointers; a recursive type is cut to {} where it
// repeats.
func (g *schemaGen) schema(t reflect.Type) (map[string]any, error) {
	switch t {
	case bytesType, hfBytesType:
		return map[string]any{"type": "string", "contentEncoding": "base64"}, nil
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}, nil
	case rawType:
		return map[string]any{}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Slice, reflect.Array:
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		s := map[string]any{"type": "array", "items": items}
		if t.Kind() == reflect.Array {
			s["minItems"], s["maxItems"] = t.Len(), t.Len()
		}
		return s, nil
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return nil, fmt.Errorf("map key type %s cannot be JSON", t.Key())
		}
		vals, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": vals}, nil
	case reflect.Struct:
		if g.seen[t] {
			return map[string]any{}, nil
		}
		g.seen[t] = true
		defer delete(g.seen, t)
		props := map[string]any{}
		required := []string{}
		for _, f := range structFields(t) {
			s, err := g.schema(f.typ)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.name, err)
			}
			props[f.name] = s
			if f.required {
				required = append(required, f.name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": required}, nil
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("type %s cannot be JSON", t)
}

func pyType(s map[string]any) string {
	switch s["type"] {
	case "string":
		if s["contentEncoding"] == "base64" {
			return "bytes"
		}
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "array":
		return "list"
	case "object":
		return "dict"
	}
	return ""
}

// binder maps a call's positional and keyword arguments onto In.
type binder struct {
	isStruct bool
	typ      reflect.Type // In, for a single positional argument
	params   []param
	types    []reflect.Type // each param's Go type
	index    map[string]int
	quoted   [][]byte // the names as JSON strings
}

func newBinder(t reflect.Type, params []param) *binder {
	b := &binder{typ: t, params: params, index: map[string]int{}}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	b.isStruct = t.Kind() == reflect.Struct && t != timeType
	if b.isStruct {
		for _, f := range structFields(t) {
			b.types = append(b.types, f.typ)
		}
	}
	for i, p := range params {
		b.index[p.Name] = i
		q, _ := json.Marshal(p.Name)
		b.quoted = append(b.quoted, q)
	}
	return b
}

func (b *binder) bind(in any, args []json.RawMessage, kwargs map[string]json.RawMessage) error {
	if !b.isStruct {
		if len(args) != 1 || len(kwargs) != 0 {
			return fmt.Errorf("takes exactly one positional argument (%d positional, %d keyword given)", len(args), len(kwargs))
		}
		if err := checkJSON(b.typ, true, args[0], "the argument"); err != nil {
			return err
		}
		return decode(args[0], in)
	}
	if len(args) > len(b.params) {
		return fmt.Errorf("takes at most %d positional arguments but %d were given", len(b.params), len(args))
	}
	vals := make([]json.RawMessage, len(b.params))
	copy(vals, args)
	for k, v := range kwargs {
		i, ok := b.index[k]
		switch {
		case !ok:
			return fmt.Errorf("got an unexpected keyword argument %q", k)
		case i < len(args):
			return fmt.Errorf("got multiple values for argument %q", k)
		}
		vals[i] = v
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	for i, p := range b.params {
		if vals[i] == nil {
			if p.Required {
				return fmt.Errorf("missing required argument %q", p.Name)
			}
			continue
		}
		if err := checkJSON(b.types[i], p.Required, vals[i], fmt.Sprintf("argument %q", p.Name)); err != nil {
			return err
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(b.quoted[i])
		buf.WriteByte(':')
		buf.Write(vals[i])
	}
	buf.WriteByte('}')
	return decode(buf.Bytes(), in)
}

// checkJSON holds raw to what the schema published for t says and
// encoding/json does not enforce: no null where a value is required
// (json leaves the zero value), every required key of a nested struct
// present and spelt exactly (json matches keys case-insensitively), and a
// Go array's exact length (json drops extra items and zero-fills missing
// ones). Type mismatches are left to json's own errors.
func checkJSON(t reflect.Type, required bool, raw json.RawMessage, at string) error {
	if string(bytes.TrimSpace(raw)) == "null" {
		if required && !nullable(t) {
			return fmt.Errorf("%s must not be None", at)
		}
		return nil
	}
	if !hasShape(t) {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil // json's own error, from decode, says it better
	}
	return checkValue(t, required, v, at)
}

func checkValue(t reflect.Type, required bool, v any, at string) error {
	if v == nil {
		if required && !nullable(t) {
			return fmt.Errorf("%s must not be None", at)
		}
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !hasShape(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := structFields(t)
		for k := range obj {
			for _, f := range fields {
				if k != f.name && strings.EqualFold(k, f.name) {
					return fmt.Errorf("%s: key %q is spelt %q", at, k, f.name)
				}
			}
		}
		for _, f := range fields {
			val, present := obj[f.name]
			if !present {
				if f.required {
					return fmt.Errorf("%s: missing key %q", at, f.name)
				}
				continue
			}
			if err := checkValue(f.typ, f.required, val, fmt.Sprintf("%s[%q]", at, f.name)); err != nil {
				return err
			}
		}
	case reflect.Array, reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return nil
		}
		if t.Kind() == reflect.Array && len(items) != t.Len() {
			return fmt.Errorf("%s has %d items; it takes exactly %d", at, len(items), t.Len())
		}
		for i, item := range items {
			if err := checkValue(t.Elem(), true, item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for k, val := range obj {
			if err := checkValue(t.Elem(), true, val, fmt.Sprintf("%s[%q]", at, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// nullable tells the Go types a JSON null decodes into meaningfully: nil.
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
		return true
	}
	return t == rawType || implementsUnmarshaler(t)
}

// hasShape tells the types checkValue looks into: structs, arrays, slices
// and maps that decode through encoding/json's own rules.
func hasShape(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType || t == rawType || t == bytesType || implementsUnmarshaler(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Array, reflect.Slice, reflect.Map:
		return true
	}
	return false
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func implementsUnmarshaler(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

func decode(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("argument %q: cannot use a JSON %s as %s", te.Field, te.Value, te.Type)
	}
	if errors.As(err, &te) {
		return fmt.Errorf("cannot use a JSON %s as %s", te.Value, te.Type)
	}
	return err
}

// Bytes is a []byte that reaches Python as bytes: it encodes as
// {"$bytes": "<base64>"}, which the guest module decodes. It decodes from
// that form or from a plain base64 string (how Python bytes arrive).
type Bytes []byte

// MarshalJSON implements json.Marshaler.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(b))+14)
	out = append(out, `{"$bytes":"`...)
	out = base64.StdEncoding.AppendEncode(out, b)
	return append(out, `"}`...), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*b = nil
		return nil
	}
	var s string
	if len(data) > 0 && data[0] == '{' {
		var obj struct {
			B *string `json:"$bytes"`
		}
		if err := json.Unmarshal(data, &obj); err != nil || obj.B == nil {
			return errors.New(`tools: Bytes wants a base64 string or {"$bytes": base64}`)
		}
		s = *obj.B
	} else if err := json.Unmarshal(data, &s); err != nil {
		return errors.New(`tools: Bytes wants a base64 string or {"$bytes": base64}`)
	}
	dec, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("tools: Bytes: %w", err)
	}
	*b = dec
	return nil
}
