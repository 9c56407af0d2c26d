// Package canon is idemgate's one canonical encoding of activity arguments: the JSON
// value encoding/json makes of them — the same fields under the same names, chosen by
// the same rules — written with sorted object keys, times in UTC, and no values that
// have no stable form (channels, funcs, complex numbers, NaN, ±Inf, pointer cycles).
// The gate hashes it to detect a conflict and prints it as the withheld call.
//
// FuzzCanonMatchesJSON holds it to encoding/json: for every value it builds, the
// canonical form decodes to the same JSON value encoding/json produces, or both refuse.
package canon

import (
	"bytes"
	"cmp"
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
	"unicode"
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

// MaxDepth is how deeply objects and arrays may nest in one argument. encoding/json
// has no such bound when encoding, but its decoder stops at 10000 levels and the
// bound keeps a runaway value (a very long linked list) from exhausting the stack.
const MaxDepth = 1000

// maxPath is how long an error path grows before its outer part is elided.
const maxPath = 200

// Encode appends the canonical JSON of args, as a JSON array, to dst.
func Encode(dst []byte, args []any) ([]byte, error) {
	dst = append(dst, '[')
	for i, a := range args {
		if i > 0 {
			dst = append(dst, ',')
		}
		e := encoder{buf: dst, arg: i}
		if err := e.top(reflect.ValueOf(a), false); err != nil {
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
// field encoding/json writes (the one it keeps when embedded fields share a name) by
// its JSON name or, failing that, its Go name, or a string-keyed map entry; matching is
// case-insensitive, an exact JSON name first. ok is false when no argument has it.
//
// A map's keys are written by the caller (a model's tool call): when two keys of
// the map match name ("tool" and "Tool"), which one a case-insensitive match takes
// would depend on map order, so that is an *AmbiguousError instead.
func Field(args []any, name string) (value []byte, ok bool, err error) {
	return findField(args, name, false)
}

// ExactField is Field that reads a map entry only under the key name exactly, and
// refuses (*AmbiguousError) a map that also has a key differing from name only in
// case: a reader that matches keys loosely could take the other one. It also
// refuses a field that more than one argument has (a model's map beside the
// caller's struct): the first would win, and the model writes the map.
func ExactField(args []any, name string) (value []byte, ok bool, err error) {
	return findField(args, name, true)
}

// AmbiguousError is a map argument with more than one key matching a field name
// ignoring case.
type AmbiguousError struct {
	Arg  int      // the argument, from 0
	Name string   // the field name asked for
	Keys []string // the matching keys, sorted
	// Args, when set, are two arguments (from 0) that both have the field
	// (ExactField only).
	Args []int
}

func (e *AmbiguousError) Error() string {
	if len(e.Args) == 2 {
		return fmt.Sprintf("arguments %d and %d both have the field %q: which one counts cannot be told",
			e.Args[0]+1, e.Args[1]+1, e.Name)
	}
	if len(e.Keys) == 1 {
		return fmt.Sprintf("argument %d has the key %q, not %q: the field is read by its exact name", e.Arg+1, e.Keys[0], e.Name)
	}
	return fmt.Sprintf("argument %d has %d keys that name the field %q (%s): which one counts cannot be told",
		e.Arg+1, len(e.Keys), e.Name, strings.Join(quoteAll(e.Keys), " and "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func findField(args []any, name string, exact bool) (value []byte, ok bool, err error) {
	for i, a := range args {
		fv, quoted, has, err := argField(i, a, name, exact)
		if err != nil {
			return nil, false, err
		}
		if exact && has {
			// The arguments may come from a model: a field that a later argument has
			// too (a model's map beside the caller's struct) cannot be told apart.
			for j := i + 1; j < len(args); j++ {
				_, _, other, err := argField(j, args[j], name, exact)
				if other || err != nil {
					return nil, false, &AmbiguousError{Arg: i, Name: name, Args: []int{i, j}}
				}
			}
		}
		if fv.IsValid() {
			e := encoder{arg: i}
			if err := e.top(fv, quoted); err != nil {
				return nil, false, err
			}
			return e.buf, true, nil
		}
	}
	return nil, false, nil
}

// argField finds name in argument i (a); has reports whether the argument has the
// field at all (fv may still be invalid: behind a nil embedded pointer).
func argField(i int, a any, name string, exact bool) (fv reflect.Value, quoted, has bool, err error) {
	v := indirect(reflect.ValueOf(a))
	if !v.IsValid() {
		return fv, false, false, nil
	}
	switch v.Kind() {
	case reflect.Struct:
		if f := lookup(fieldsOf(v.Type()), name); f != nil {
			has = true
			var ok bool
			if fv, ok = fieldByIndex(v, f.index); !ok {
				fv = reflect.Value{} // behind a nil embedded pointer: encoding/json leaves it out
			}
			quoted = f.quoted
		}
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String {
			var keys []string
			iter := v.MapRange()
			for iter.Next() {
				k := iter.Key().String()
				if !strings.EqualFold(k, name) {
					continue
				}
				keys = append(keys, k)
				if !exact || k == name {
					fv = iter.Value()
				}
			}
			if len(keys) > 1 {
				slices.Sort(keys)
				return reflect.Value{}, false, true, &AmbiguousError{Arg: i, Name: name, Keys: keys}
			}
			if exact && len(keys) == 1 && keys[0] != name {
				// Only a case variant: not the field, and a loose reader would take it.
				return reflect.Value{}, false, true, &AmbiguousError{Arg: i, Name: name, Keys: keys}
			}
			has = len(keys) == 1
		}
	}
	return fv, quoted, has, nil
}

// lookup finds a field by exact JSON name, then by JSON name or Go name ignoring case.
func lookup(fields []field, name string) *field {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i]
		}
	}
	for i := range fields {
		if strings.EqualFold(fields[i].name, name) {
			return &fields[i]
		}
	}
	for i := range fields {
		if strings.EqualFold(fields[i].goName, name) {
			return &fields[i]
		}
	}
	return nil
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
	buf   []byte
	arg   int
	depth int   // objects and arrays open around the current value
	open  []ref // pointers, maps and slices being encoded around the current value
}

// ref identifies a pointer, map or slice by type, address and (for slices) length,
// as encoding/json does to detect a cycle.
type ref struct {
	t reflect.Type
	p uintptr
	n int
}

// top encodes one argument (or field); a panic in the argument's own methods
// (MarshalJSON, MarshalText, IsZero) is refused as an error, not passed on.
func (e *encoder) top(v reflect.Value, quoted bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = e.fail(fmt.Sprintf("encoding it panicked: %v", r))
		}
	}()
	return e.value(v, quoted)
}

// method calls an argument's MarshalJSON or MarshalText, turning a panic into an error.
func method(call func() ([]byte, error)) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return call()
}

func (e *encoder) fail(reason string) error {
	return &Error{Arg: e.arg, Reason: reason}
}

// at prefixes the path of a failure inside a container; the happy path builds no paths.
func at(err error, segment func() string) error {
	if ce, ok := err.(*Error); ok {
		switch {
		case strings.HasPrefix(ce.Path, "…"):
		case len(ce.Path) >= maxPath:
			ce.Path = "…" + ce.Path
		default:
			ce.Path = segment() + ce.Path
		}
	}
	return err
}

// enter records that the value of r is being encoded; a value already open around
// it is a cycle. leave must follow a nil error.
func (e *encoder) enter(r ref) error {
	for _, o := range e.open {
		if o == r {
			return e.fail(fmt.Sprintf("a cycle: this %s refers back to a value that contains it "+
				"(encoding/json refuses it too); pass the data without the back-reference", r.t))
		}
	}
	e.open = append(e.open, r)
	return nil
}

func (e *encoder) leave() { e.open = e.open[:len(e.open)-1] }

// nest opens an object or array level.
func (e *encoder) nest() error {
	if e.depth++; e.depth > MaxDepth {
		return e.fail(fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	return nil
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonNumberType    = reflect.TypeFor[json.Number]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType      = reflect.TypeFor[interface{ IsZero() bool }]()
)

// value encodes v as encoding/json's encoder for v's type would; quoted is the
// `string` option of the field v came from.
func (e *encoder) value(v reflect.Value, quoted bool) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	k := t.Kind()
	if t == timeType {
		return e.time(v)
	}
	if k == reflect.Pointer || k == reflect.Interface {
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if k == reflect.Interface {
			// Like encoding/json, an interface type with the method calls it on
			// whatever it holds, a nil pointer included.
			switch {
			case t.Implements(jsonMarshalerType):
				return e.callJSON(v.Elem())
			case t.Implements(textMarshalerType):
				return e.callText(v.Elem())
			}
			return e.value(v.Elem(), quoted)
		}
		if t.Elem() == timeType { // a *time.Time is its time, in UTC like any other
			return e.time(v.Elem())
		}
	}
	// encoding/json's order: a MarshalJSON of the addressable value's pointer, of the
	// value, then the same for MarshalText.
	if k != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(jsonMarshalerType) {
		return e.marshalJSON(v.Addr())
	}
	if t.Implements(jsonMarshalerType) {
		return e.marshalJSON(v)
	}
	if k != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(textMarshalerType) {
		return e.marshalText(v.Addr())
	}
	if t.Implements(textMarshalerType) {
		return e.marshalText(v)
	}
	switch k {
	case reflect.Bool:
		e.quote(quoted)
		e.buf = strconv.AppendBool(e.buf, v.Bool())
		e.quote(quoted)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.quote(quoted)
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
		e.quote(quoted)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.quote(quoted)
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
		e.quote(quoted)
	case reflect.Float32, reflect.Float64:
		return e.float(v.Float(), t.Bits(), quoted)
	case reflect.String:
		return e.string(v, quoted)
	case reflect.Struct:
		return e.structure(v)
	case reflect.Map:
		return e.mapping(v)
	case reflect.Slice:
		return e.slice(v)
	case reflect.Array:
		return e.array(v)
	case reflect.Pointer:
		if err := e.enter(ref{t: t, p: v.Pointer()}); err != nil {
			return err
		}
		if err := e.value(v.Elem(), quoted); err != nil {
			return err
		}
		e.leave()
	default:
		return e.fail(fmt.Sprintf("a %s has no canonical form; pass plain data (structs, maps, slices, strings, numbers)", k))
	}
	return nil
}

func (e *encoder) quote(quoted bool) {
	if quoted {
		e.buf = append(e.buf, '"')
	}
}

// time writes a time.Time in UTC, so that one instant has one form whatever its zone;
// it refuses what time.Time.MarshalJSON refuses.
func (e *encoder) time(v reflect.Value) error {
	if !v.CanInterface() {
		return e.fail("a time.Time in an unexported field has no canonical form")
	}
	tm := v.Interface().(time.Time)
	if y := tm.Year(); y < 0 || y > 9999 {
		return e.fail(fmt.Sprintf("the time %s has a year outside [0,9999] (JSON cannot carry it)", tm))
	}
	if _, off := tm.Zone(); off/60/60 >= 24 || off/60/60 <= -24 {
		return e.fail(fmt.Sprintf("the time %s has a zone offset of 24 hours or more (JSON cannot carry it)", tm))
	}
	e.buf = append(e.buf, '"')
	e.buf = tm.UTC().AppendFormat(e.buf, time.RFC3339Nano)
	e.buf = append(e.buf, '"')
	return nil
}

func (e *encoder) string(v reflect.Value, quoted bool) error {
	if v.Type() == jsonNumberType {
		n := v.String()
		if n == "" {
			n = "0" // encoding/json writes the zero Number as 0
		}
		if !isValidNumber(n) {
			return e.fail("json.Number " + strconv.Quote(n) + " is not a JSON number")
		}
		e.quote(quoted)
		e.buf = append(e.buf, n...)
		e.quote(quoted)
		return nil
	}
	if quoted {
		// The `string` option: the JSON text of the string, as a string.
		inner, err := json.Marshal(v.String())
		if err != nil {
			return e.fail(err.Error())
		}
		e.str(string(inner))
		return nil
	}
	e.str(v.String())
	return nil
}

// float writes f as encoding/json does (ES6 number formatting).
func (e *encoder) float(f float64, bits int, quoted bool) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return e.fail(fmt.Sprintf("%v has no canonical form (JSON cannot carry it)", f))
	}
	e.quote(quoted)
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, bits)
	if format == 'e' { // e-09 → e-9
		if n := len(e.buf); n >= 4 && e.buf[n-4] == 'e' && e.buf[n-3] == '-' && e.buf[n-2] == '0' {
			e.buf[n-2] = e.buf[n-1]
			e.buf = e.buf[:n-1]
		}
	}
	e.quote(quoted)
	return nil
}

func (e *encoder) slice(v reflect.Value) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	if el := t.Elem(); el.Kind() == reflect.Uint8 {
		if p := reflect.PointerTo(el); !p.Implements(jsonMarshalerType) && !p.Implements(textMarshalerType) {
			e.buf = append(e.buf, '"')
			e.buf = base64.StdEncoding.AppendEncode(e.buf, v.Bytes())
			e.buf = append(e.buf, '"')
			return nil
		}
	}
	if !mayRefer(t.Elem()) {
		return e.array(v)
	}
	if err := e.enter(ref{t: t, p: v.Pointer(), n: v.Len()}); err != nil {
		return err
	}
	if err := e.array(v); err != nil {
		return err
	}
	e.leave()
	return nil
}

// mayRefer says whether a value of t can hold a pointer, map or slice (and so be part of a cycle).
func mayRefer(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return false
	}
	return true
}

func (e *encoder) array(v reflect.Value) error {
	if err := e.nest(); err != nil {
		return err
	}
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v.Index(i), false); err != nil {
			return at(err, func() string { return "[" + strconv.Itoa(i) + "]" })
		}
	}
	e.buf = append(e.buf, ']')
	e.depth--
	return nil
}

func (e *encoder) structure(v reflect.Value) error {
	if err := e.nest(); err != nil {
		return err
	}
	e.buf = append(e.buf, '{')
	first := true
	fields := fieldsOf(v.Type())
	for i := range fields {
		f := &fields[i]
		fv, ok := fieldByIndex(v, f.index)
		if !ok || f.omitEmpty && isEmptyValue(fv) || f.omitZero && f.isZero(fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = append(e.buf, f.quotedName...)
		e.buf = append(e.buf, ':')
		if err := e.value(fv, f.quoted); err != nil {
			return at(err, func() string { return "." + f.goName })
		}
	}
	e.buf = append(e.buf, '}')
	e.depth--
	return nil
}

// fieldByIndex follows embedded pointers; ok is false through a nil one.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for _, x := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// isEmptyValue is encoding/json's test for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

func (e *encoder) mapping(v reflect.Value) error {
	t := v.Type()
	switch t.Key().Kind() {
	case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		if !t.Key().Implements(textMarshalerType) {
			return e.fail(fmt.Sprintf("a map keyed by %s has no canonical form", t.Key()))
		}
	}
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if err := e.enter(ref{t: t, p: v.Pointer()}); err != nil {
		return err
	}
	if err := e.nest(); err != nil {
		return err
	}
	type kv struct {
		k   string
		v   reflect.Value
		enc []byte // the encoded value, only where two keys are written alike
	}
	entries := make([]kv, 0, v.Len())
	iter := v.MapRange()
	for iter.Next() {
		k, err := e.mapKey(iter.Key())
		if err != nil {
			return err
		}
		entries = append(entries, kv{k: k, v: iter.Value()})
	}
	slices.SortFunc(entries, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	// Distinct keys that MarshalText writes alike: order them by value so that the
	// form does not depend on the map's iteration order.
	for i := 1; i < len(entries); i++ {
		if entries[i].k != entries[i-1].k {
			continue
		}
		for j := range entries {
			sub := encoder{arg: e.arg, depth: e.depth, open: e.open}
			if err := sub.value(entries[j].v, false); err != nil {
				return at(err, func() string { return "[" + strconv.Quote(entries[j].k) + "]" })
			}
			entries[j].enc = sub.buf
		}
		slices.SortStableFunc(entries, func(a, b kv) int {
			return cmp.Or(strings.Compare(a.k, b.k), bytes.Compare(a.enc, b.enc))
		})
		break
	}
	e.buf = append(e.buf, '{')
	for i, en := range entries {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(en.k)
		e.buf = append(e.buf, ':')
		if en.enc != nil {
			e.buf = append(e.buf, en.enc...)
			continue
		}
		if err := e.value(en.v, false); err != nil {
			return at(err, func() string { return "[" + strconv.Quote(en.k) + "]" })
		}
	}
	e.buf = append(e.buf, '}')
	e.depth--
	e.leave()
	return nil
}

// mapKey names a map entry as encoding/json does.
func (e *encoder) mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalerType) {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", nil
		}
		if k.Kind() == reflect.Interface && k.IsNil() {
			return "", e.fail("a nil map key has no canonical form")
		}
		txt, err := method(k.Interface().(encoding.TextMarshaler).MarshalText)
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

// marshalJSON canonicalises a json.Marshaler's output by decoding and re-encoding it.
func (e *encoder) marshalJSON(v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return e.callJSON(v)
}

func (e *encoder) callJSON(v reflect.Value) error {
	if !v.CanInterface() {
		return e.fail(fmt.Sprintf("a %s in an unexported field has no canonical form", v.Type()))
	}
	raw, err := method(v.Interface().(json.Marshaler).MarshalJSON)
	if err != nil {
		return e.fail("MarshalJSON: " + err.Error())
	}
	if !json.Valid(raw) {
		return e.fail(fmt.Sprintf("MarshalJSON of %s returned invalid JSON", v.Type()))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return e.fail("MarshalJSON returned invalid JSON: " + err.Error())
	}
	return e.value(reflect.ValueOf(x), false)
}

func (e *encoder) marshalText(v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return e.callText(v)
}

func (e *encoder) callText(v reflect.Value) error {
	if !v.CanInterface() {
		return e.fail(fmt.Sprintf("a %s in an unexported field has no canonical form", v.Type()))
	}
	txt, err := method(v.Interface().(encoding.TextMarshaler).MarshalText)
	if err != nil {
		return e.fail("MarshalText: " + err.Error())
	}
	e.str(string(txt))
	return nil
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

// isValidNumber is encoding/json's grammar of a JSON number (RFC 8259).
func isValidNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		if s = s[1:]; s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = strings.TrimLeft(s[1:], "0123456789")
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = strings.TrimLeft(s[2:], "0123456789")
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			if s = s[1:]; s == "" {
				return false
			}
		}
		s = strings.TrimLeft(s, "0123456789")
	}
	return s == ""
}

// field is a struct field encoding/json writes.
type field struct {
	name       string
	goName     string
	quotedName []byte // name as a JSON string
	index      []int
	tag        bool // the name came from a json tag
	typ        reflect.Type
	omitEmpty  bool
	omitZero   bool
	isZero     func(reflect.Value) bool // for omitzero
	quoted     bool                     // the `string` option, on a type it applies to
}

var fieldCache sync.Map // reflect.Type -> []field

// fieldsOf lists the fields encoding/json writes for struct type t, sorted by JSON
// name. It is encoding/json's typeFields: embedded structs (also through a pointer,
// also unexported ones with exported fields) are flattened level by level, a type
// seen at an earlier level is not walked again, and of fields sharing a name the
// shallowest wins, a tagged one over an untagged one at the same depth; two left
// at the same depth and tagging are both dropped.
func fieldsOf(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	f, _ := fieldCache.LoadOrStore(t, typeFields(t))
	return f.([]field)
}

func typeFields(t reflect.Type) []field {
	current := []field{}
	next := []field{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []field

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := range f.typ.NumField() {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue // an embedded unexported non-struct type
					}
					// An embedded unexported struct type may have exported fields.
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				index := make([]int, len(f.index)+1)
				copy(index, f.index)
				index[len(f.index)] = i

				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				quoted := false
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						quoted = true
					}
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					q, _ := json.Marshal(name)
					fld := field{name: name, goName: sf.Name, quotedName: q, index: index, tag: tagged, typ: ft,
						omitEmpty: hasOption(opts, "omitempty"), omitZero: hasOption(opts, "omitzero"), quoted: quoted}
					if fld.omitZero {
						fld.isZero = zeroTest(sf.Type)
					}
					fields = append(fields, fld)
					if count[f.typ] > 1 {
						// The type is embedded twice at this level: add a second copy so
						// that the field is seen as ambiguous below.
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				// An embedded struct to walk at the next level.
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, field{name: ft.Name(), index: index, typ: ft})
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tag != b.tag {
			if a.tag {
				return -1
			}
			return +1
		}
		return slices.Compare(a.index, b.index)
	})
	// Of the fields sharing a name, keep the dominant one, or none when it is ambiguous.
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		name := fields[i].name
		for advance = 1; i+advance < len(fields) && fields[i+advance].name == name; advance++ {
		}
		same := fields[i : i+advance]
		if len(same) > 1 && len(same[0].index) == len(same[1].index) && same[0].tag == same[1].tag {
			continue
		}
		out = append(out, same[0])
	}
	return slices.Clip(out)
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == name {
			return true
		}
	}
	return false
}

// isValidTag is encoding/json's test for a usable tag name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// zeroTest is encoding/json's omitzero test for a field of type t: its IsZero
// method when it has one, else the zero value.
func zeroTest(t reflect.Type) func(reflect.Value) bool {
	type isZeroer interface{ IsZero() bool }
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() ||
				v.CanInterface() && v.Interface().(isZeroer).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.CanInterface() && v.Interface().(isZeroer).IsZero()
		}
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.CanInterface() && v.Interface().(isZeroer).IsZero()
		}
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanInterface() {
				return false
			}
			if !v.CanAddr() {
				v2 := reflect.New(v.Type()).Elem()
				v2.Set(v)
				v = v2
			}
			return v.Addr().Interface().(isZeroer).IsZero()
		}
	}
	return reflect.Value.IsZero
}
