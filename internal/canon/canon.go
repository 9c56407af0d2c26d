// Package canon is idemgate's one canonical encoding of activity arguments: JSON with
// sorted object keys, struct fields under their JSON names, times in UTC, and no
// values that have no stable form (channels, funcs, complex numbers, NaN, ±Inf).
// The gate hashes it to detect a conflict and prints it as the withheld call.
package canon

import (
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Error says which argument (and where inside it) has no canonical form.
type Error struct {
	// Arg is the zero-based argument position.
	Arg int
	// Path is where inside the argument, e.g. ".Items[2].Price"; empty for the argument itself.
	Path string
	// Reason says what was found.
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("argument %d%s: %s", e.Arg+1, pathSuffix(e.Path), e.Reason)
}

func pathSuffix(p string) string {
	if p == "" {
		return ""
	}
	return " (at " + p + ")"
}

const maxDepth = 64

// Encode appends the canonical JSON of args, as a JSON array, to dst.
func Encode(dst []byte, args []any) ([]byte, error) {
	dst = append(dst, '[')
	for i, a := range args {
		if i > 0 {
			dst = append(dst, ',')
		}
		e := encoder{buf: dst, arg: i}
		if err := e.value(reflect.ValueOf(a), 0); err != nil {
			return nil, err
		}
		dst = e.buf
	}
	return append(dst, ']'), nil
}

// Hash returns the hex SHA-256 of a canonical encoding.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var out [sha256.Size * 2]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// EncodeHash returns the canonical JSON of args (a fresh slice the caller owns) and its hash.
func EncodeHash(args []any) ([]byte, string, error) {
	bp := bufPool.Get().(*[]byte)
	b, err := Encode((*bp)[:0], args)
	if err != nil {
		bufPool.Put(bp)
		return nil, "", err
	}
	out := slices.Clone(b)
	*bp = b
	bufPool.Put(bp)
	return out, Hash(out), nil
}

// Field returns the canonical JSON of the first argument field named name: a struct
// field by its JSON name or Go name, or a string-keyed map entry; matching is
// case-insensitive. ok is false when no argument has it.
func Field(args []any, name string) (value []byte, ok bool, err error) {
	for i, a := range args {
		v := indirect(reflect.ValueOf(a))
		if !v.IsValid() {
			continue
		}
		var fv reflect.Value
		switch v.Kind() {
		case reflect.Struct:
			for _, f := range fieldsOf(v.Type()) {
				if strings.EqualFold(f.name, name) || strings.EqualFold(f.goName, name) {
					fv = v.FieldByIndex(f.index)
					break
				}
			}
		case reflect.Map:
			if v.Type().Key().Kind() == reflect.String {
				iter := v.MapRange()
				for iter.Next() {
					if strings.EqualFold(iter.Key().String(), name) {
						fv = iter.Value()
						break
					}
				}
			}
		}
		if fv.IsValid() {
			e := encoder{arg: i}
			if err := e.value(fv, 1); err != nil {
				return nil, false, err
			}
			return e.buf, true, nil
		}
	}
	return nil, false, nil
}

func indirect(v reflect.Value) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

type encoder struct {
	buf []byte
	arg int
}

func (e *encoder) fail(reason string) error {
	return &Error{Arg: e.arg, Reason: reason}
}

// at prefixes the path of a failure inside a container; the happy path builds no paths.
func at(err error, segment func() string) error {
	if ce, ok := err.(*Error); ok {
		ce.Path = segment() + ce.Path
	}
	return err
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonNumberType    = reflect.TypeFor[json.Number]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func (e *encoder) value(v reflect.Value, depth int) error {
	if depth > maxDepth {
		return e.fail("nested deeper than 64 levels (a cycle?)")
	}
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	if t == timeType {
		tm := v.Interface().(time.Time)
		e.buf = append(e.buf, '"')
		e.buf = tm.UTC().AppendFormat(e.buf, time.RFC3339Nano)
		e.buf = append(e.buf, '"')
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if v.Kind() == reflect.Pointer && t.Implements(jsonMarshalerType) {
			return e.marshaler(v, depth)
		}
		return e.value(v.Elem(), depth+1)
	}
	if t == jsonNumberType {
		n := v.String()
		if _, err := strconv.ParseFloat(n, 64); err != nil {
			return e.fail("json.Number " + strconv.Quote(n) + " is not a number")
		}
		e.buf = append(e.buf, n...)
		return nil
	}
	if t.Implements(jsonMarshalerType) {
		return e.marshaler(v, depth)
	}
	if t.Kind() != reflect.String && t.Implements(textMarshalerType) {
		txt, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return e.fail("MarshalText: " + err.Error())
		}
		e.str(string(txt))
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return e.float(v.Float(), t.Bits())
	case reflect.String:
		e.str(v.String())
	case reflect.Struct:
		return e.structure(v, depth)
	case reflect.Map:
		return e.mapping(v, depth)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			e.buf = append(e.buf, '"')
			e.buf = base64.StdEncoding.AppendEncode(e.buf, v.Bytes())
			e.buf = append(e.buf, '"')
			return nil
		}
		return e.array(v, depth)
	case reflect.Array:
		return e.array(v, depth)
	default:
		return e.fail(fmt.Sprintf("a %s has no canonical form; pass plain data (structs, maps, slices, strings, numbers)", v.Kind()))
	}
	return nil
}

func (e *encoder) float(f float64, bits int) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return e.fail(fmt.Sprintf("%v has no canonical form (JSON cannot carry it)", f))
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, bits)
	return nil
}

func (e *encoder) array(v reflect.Value, depth int) error {
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v.Index(i), depth+1); err != nil {
			return at(err, func() string { return "[" + strconv.Itoa(i) + "]" })
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *encoder) structure(v reflect.Value, depth int) error {
	e.buf = append(e.buf, '{')
	first := true
	for _, f := range fieldsOf(v.Type()) {
		fv, ok := fieldByIndex(v, f.index)
		if !ok || f.omitEmpty && fv.IsZero() {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = append(e.buf, f.quoted...)
		e.buf = append(e.buf, ':')
		if err := e.value(fv, depth+1); err != nil {
			return at(err, func() string { return "." + f.goName })
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// fieldByIndex follows embedded pointers; ok is false through a nil one.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func (e *encoder) mapping(v reflect.Value, depth int) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	type kv struct {
		k string
		v reflect.Value
	}
	entries := make([]kv, 0, v.Len())
	iter := v.MapRange()
	for iter.Next() {
		k, err := e.mapKey(iter.Key())
		if err != nil {
			return err
		}
		entries = append(entries, kv{k, iter.Value()})
	}
	slices.SortFunc(entries, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	e.buf = append(e.buf, '{')
	for i, en := range entries {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(en.k)
		e.buf = append(e.buf, ':')
		if err := e.value(en.v, depth+1); err != nil {
			return at(err, func() string { return "[" + strconv.Quote(en.k) + "]" })
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalerType) {
		txt, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "", e.fail("map key MarshalText: " + err.Error())
		}
		return string(txt), nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", e.fail(fmt.Sprintf("a map keyed by %s has no canonical form", k.Type()))
}

// marshaler canonicalises a json.Marshaler's output by decoding and re-encoding it.
func (e *encoder) marshaler(v reflect.Value, depth int) error {
	raw, err := v.Interface().(json.Marshaler).MarshalJSON()
	if err != nil {
		return e.fail("MarshalJSON: " + err.Error())
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return e.fail("MarshalJSON returned invalid JSON: " + err.Error())
	}
	return e.value(reflect.ValueOf(x), depth+1)
}

func (e *encoder) str(s string) {
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			e.buf = append(e.buf, s[start:i]...)
			switch c {
			case '"', '\\':
				e.buf = append(e.buf, '\\', c)
			case '\n':
				e.buf = append(e.buf, '\\', 'n')
			case '\r':
				e.buf = append(e.buf, '\\', 'r')
			case '\t':
				e.buf = append(e.buf, '\\', 't')
			default:
				e.buf = append(e.buf, `\u00`...)
				e.buf = append(e.buf, hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			e.buf = append(e.buf, s[start:i]...)
			if r == utf8.RuneError {
				e.buf = append(e.buf, `\ufffd`...)
			} else {
				e.buf = append(e.buf, `\u202`...)
				e.buf = append(e.buf, hexDigits[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
}

const hexDigits = "0123456789abcdef"

type field struct {
	name      string
	goName    string
	quoted    []byte
	index     []int
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type -> []field

// fieldsOf lists a struct's exported fields the way encoding/json names them,
// flattening untagged embedded structs, sorted by JSON name.
func fieldsOf(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	var out []field
	seen := map[string]bool{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			if sf.Anonymous && name == "" {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft, idx)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			q, _ := json.Marshal(name)
			out = append(out, field{name: name, goName: sf.Name, quoted: q, index: idx,
				omitEmpty: strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")})
		}
	}
	walk(t, nil)
	slices.SortFunc(out, func(a, b field) int { return strings.Compare(a.name, b.name) })
	fieldCache.Store(t, out)
	return out
}
