//lint:file-ignore SA5008 odd json tags on purpose: how encoding/json reads them is under test

package canon_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
)

// The shapes FuzzCanonMatchesJSON builds values of: embedding, shadowing, tags,
// options, pointers, self-embedding, marshalers, map keys, unsupported kinds.

// MJ marshals itself by value; its JSON depends on V (some of it invalid).
type MJ struct{ V int8 }

func (m MJ) MarshalJSON() ([]byte, error) {
	switch m.V % 8 {
	case 0:
		return []byte(`{"b":1, "a":[1,"x",null], "a":2}`), nil
	case 1:
		return []byte(`  "s\u00e9\ud800"  `), nil
	case 2:
		return []byte(`1 2`), nil
	case 3:
		return nil, errors.New("no")
	case 4:
		return []byte(`12345678901234567890123456789e-400`), nil
	case 5:
		return []byte(``), nil
	case 6:
		return []byte(`{"t":"2026-01-02T03:04:05+01:00","n":[[{}]]}`), nil
	}
	return []byte(strconv.Itoa(int(m.V))), nil
}

// PMJ marshals itself only through a pointer: encoding/json calls it when the value is addressable.
type PMJ struct{ V int }

func (p *PMJ) MarshalJSON() ([]byte, error) { return []byte(`["pmj",` + strconv.Itoa(p.V) + `]`), nil }

// TM is an integer that writes itself as text (also as a map key); 13 fails.
type TM int16

func (t TM) MarshalText() ([]byte, error) {
	if t == 13 {
		return nil, errors.New("unlucky")
	}
	return []byte("tm<" + strconv.Itoa(int(t)) + ">"), nil
}

// PTM writes itself as text only through a pointer.
type PTM struct{ S string }

func (p *PTM) MarshalText() ([]byte, error) { return []byte("ptm:" + p.S), nil }

// STM is a string kind with its own text form.
type STM string

func (s STM) MarshalText() ([]byte, error) { return []byte(strings.ToUpper(string(s))), nil }

// Both has MarshalJSON on the pointer and MarshalText on the value.
type Both struct{ N int }

func (b *Both) MarshalJSON() ([]byte, error) {
	return []byte(`{"json":` + strconv.Itoa(b.N) + `}`), nil
}
func (b Both) MarshalText() ([]byte, error) { return []byte("text" + strconv.Itoa(b.N)), nil }

// BMJ is a byte with MarshalJSON: a []BMJ is an array, not base64.
type BMJ byte

func (b BMJ) MarshalJSON() ([]byte, error) { return []byte(`"b` + strconv.Itoa(int(b)) + `"`), nil }

// MyByte is a plain byte: a []MyByte is base64.
type MyByte uint8

// ZeroMe says it is zero when N is 7 (for omitzero).
type ZeroMe struct{ N int }

func (z ZeroMe) IsZero() bool { return z.N == 7 }

// MyInt has MarshalJSON although it is an int kind (the string option does not apply).
type MyInt int

func (m MyInt) MarshalJSON() ([]byte, error) { return []byte(`"myint"`), nil }

type Base struct {
	Name  string
	Email string `json:"email"`
	ID    int    `json:"id,omitempty"`
}

type Other struct {
	Name string
	Kind string
}

type Deep struct{ Base }

// TagA and TagB, embedded side by side, both have a field X: TagB's is tagged and wins.
type TagA struct {
	X string
}

type TagB struct {
	Y string `json:"X"`
	Z string `json:"z"`
}

type hidden struct {
	Visible string
	//lint:ignore U1000 an unexported field encoding/json skips
	secret int
}

type Node struct {
	*Node
	Val int
}

type List struct {
	Val  int
	Next *List
}

type Tree struct {
	Kids map[string]*Tree `json:"kids,omitempty"`
	Leaf []any            `json:"leaf"`
}

type (
	SFlat struct {
		B   bool
		I   int
		I8  int8
		U64 uint64
		F32 float32
		F64 float64
		S   string
		Up  uintptr
		//lint:ignore U1000 an unexported field encoding/json skips
		x int
	}
	SShadow struct {
		Base
		Name string
	}
	SShadowTagged struct {
		Base
		Mail string `json:"email"`
	}
	STaggedWins struct {
		Other
		T struct {
			Name string `json:"Name"`
		}
		Base
	}
	SAmbiguous struct {
		Base
		Other
		Keep int
	}
	SDeeper struct {
		Deep
		Other
	}
	SEmbedPtr struct {
		*Base
		Own string
	}
	SHidden struct {
		hidden
		Own int
	}
	SHiddenPtr struct {
		*hidden
		Own int
	}
	SNode    struct{ N Node }
	SList    struct{ L *List }
	SOptions struct {
		Int   int            `json:"int,string"`
		PInt  *int           `json:"pint,string"`
		PPInt **int          `json:"ppint,string"`
		F32   float32        `json:",string"`
		F64   float64        `json:"f64,string"`
		Bool  bool           `json:"bool,string"`
		Str   string         `json:"str,string"`
		Num   json.Number    `json:"num,string"`
		Uint  uint16         `json:"uint,string"`
		My    MyInt          `json:"my,string"`
		Any   any            `json:"any,string"`
		TM    TM             `json:"tm,string"`
		Strs  []string       `json:"strs,string"`
		Map   map[string]int `json:"map,string,omitempty"`
	}
	SOmitEmpty struct {
		B  bool            `json:"b,omitempty"`
		I  int             `json:"i,omitempty"`
		F  float64         `json:"f,omitempty"`
		S  string          `json:"s,omitempty"`
		P  *int            `json:"p,omitempty"`
		A  any             `json:"a,omitempty"`
		M  map[string]int  `json:"m,omitempty"`
		L  []int           `json:"l,omitempty"`
		Z  [0]int          `json:"z,omitempty"`
		R  [2]int          `json:"r,omitempty"`
		St struct{ X int } `json:"st,omitempty"`
		T  time.Time       `json:"t,omitempty"`
	}
	SOmitZero struct {
		T    time.Time       `json:"t,omitzero"`
		Z    ZeroMe          `json:"z,omitzero"`
		PZ   *ZeroMe         `json:"pz,omitzero"`
		A    [2]int          `json:"a,omitzero"`
		St   struct{ X int } `json:"st,omitzero"`
		F    float64         `json:"f,omitzero"`
		L    []int           `json:"l,omitzero"`
		Both []int           `json:"both,omitempty,omitzero"`
	}
	STags struct {
		Quote   string `json:"a\"b"`
		Dash    string `json:"-,"`
		Skip    string `json:"-"`
		Empty   string `json:",omitempty"`
		Punct   string `json:"a-b.c$"`
		Unicode string `json:"名前"`
		Space   string `json:" "`
		TagA
		TagB
	}
	SMaps struct {
		Int   map[int]string
		U8    map[uint8]bool
		TM    map[TM]int
		STM   map[STM]int
		PTM   map[*PTM]int
		Str   map[string]any
		Bad   map[float64]int
		Named map[STM]map[int8]string
	}
	SBytes struct {
		B    []byte
		A    [4]byte
		BMJ  []BMJ
		My   []MyByte
		PB   *[]byte
		Bufs [][]byte
	}
	STime struct {
		T  time.Time
		P  *time.Time
		In struct{ time.Time }
	}
	SIface struct {
		A any
		M json.Marshaler
		T encoding.TextMarshaler
		L []any
		E error
	}
	SUnsupported struct {
		C  chan int
		F  func()
		X  complex128
		PC *chan int
	}
	SChanSlice struct {
		Chans []chan int
		Ok    int
	}
	SMarshalers struct {
		MJ   MJ
		PMJ  PMJ
		PPMJ *PMJ
		TM   TM
		PTM  PTM
		STM  STM
		Both Both
		My   MyInt
	}
	SEmbedTM struct {
		TM
		Other int
	}
	SEmbedTagged struct {
		Base `json:"base"`
		Name string
	}
	STwice struct {
		A1 struct{ Base }
		SDeeper
	}
	SSameTwice struct {
		X struct{ Deep }
		Y struct{ Deep }
		Deep
		D2 Deep
	}
	SArrays struct {
		A  [3]Base
		P  [2]*PMJ
		V  [2]PMJ
		M  [1]map[TM]string
		AA [2][2]int8
	}
	SPtrs struct {
		PP  **Base
		PPP ***string
		PI  *any
	}
	SNumbers struct {
		N   json.Number
		Big json.Number
		F   float64
		I   int64
		U   uint64
		Any any
	}
	SEmbedTime struct {
		time.Time
		Note string
	}
	SEmbedPtrMarshal struct {
		*PMJ
		Note string
	}
	SRecursive struct {
		Self  *SRecursive
		Kids  []SRecursive
		ByKey map[string]*SRecursive
		Val   string
	}
)

var fuzzTypes = []reflect.Type{
	reflect.TypeFor[SFlat](), reflect.TypeFor[SShadow](), reflect.TypeFor[SShadowTagged](),
	reflect.TypeFor[STaggedWins](), reflect.TypeFor[SAmbiguous](), reflect.TypeFor[SDeeper](),
	reflect.TypeFor[SEmbedPtr](), reflect.TypeFor[SHidden](), reflect.TypeFor[SHiddenPtr](),
	reflect.TypeFor[SNode](), reflect.TypeFor[SList](), reflect.TypeFor[SOptions](),
	reflect.TypeFor[SOmitEmpty](), reflect.TypeFor[SOmitZero](), reflect.TypeFor[STags](),
	reflect.TypeFor[SMaps](), reflect.TypeFor[SBytes](), reflect.TypeFor[STime](),
	reflect.TypeFor[SIface](), reflect.TypeFor[SUnsupported](), reflect.TypeFor[SChanSlice](),
	reflect.TypeFor[SMarshalers](), reflect.TypeFor[SEmbedTM](), reflect.TypeFor[SEmbedTagged](),
	reflect.TypeFor[STwice](), reflect.TypeFor[SSameTwice](), reflect.TypeFor[SArrays](),
	reflect.TypeFor[SPtrs](), reflect.TypeFor[SNumbers](), reflect.TypeFor[SEmbedTime](),
	reflect.TypeFor[SEmbedPtrMarshal](), reflect.TypeFor[SRecursive](), reflect.TypeFor[Node](),
	reflect.TypeFor[Tree](), reflect.TypeFor[[]any](), reflect.TypeFor[map[string]any](),
	reflect.TypeFor[Both](), reflect.TypeFor[STM](), reflect.TypeFor[json.Number](),
}

// src hands out the fuzz input as choices; past its end every choice is 0.
type src struct{ b []byte }

func (s *src) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *src) n(k int) int { return int(s.byte()) % k }

func (s *src) u64() uint64 {
	var x uint64
	for range 8 {
		x = x<<8 | uint64(s.byte())
	}
	return x
}

var fuzzStrings = []string{"", "a", "Name", "<&>", "\u2028\u2029", "\xff\xfe", "\x08\x0c\x00\x1f", "é名", `"\`,
	"2026-01-02T03:04:05+01:00", "bob", "alice"}

func (s *src) str() string {
	if c := s.byte(); c < 200 {
		return fuzzStrings[int(c)%len(fuzzStrings)]
	}
	n := s.n(9)
	var b []byte
	for range n {
		b = append(b, s.byte())
	}
	return string(b)
}

var fuzzNumbers = []string{"", "0", "-0", "1", "1.5", "1e400", "-1e-400", "12345678901234567890123456789",
	"1.0", "01", "+1", ".5", "1.", "0x10", "Inf", "NaN", "1e", "1E+2", "-", "1_0", " 1"}

var fuzzFloats = []float64{0, math.Copysign(0, -1), 1.5, 1e-7, 1e-6, 9.999999e-7, 1e20, 1e21, 1e-300,
	math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32, 1.0 / 3, math.NaN(), math.Inf(1), 0.1, 123456789}

var fuzzYears = []int{2026, 1970, 1, 9998, 0, 10000, -1}

// filler builds a value of a type from the input.
type filler struct {
	s         *src
	ancestors []reflect.Value // pointers being filled, to close a cycle now and then
}

func (f *filler) fill(v reflect.Value, depth int) {
	t := v.Type()
	if t.Kind() == reflect.Struct && t != reflect.TypeFor[time.Time]() {
		for i := range t.NumField() {
			if fv := v.Field(i); fv.CanSet() || fv.Kind() == reflect.Struct {
				f.fill(fv, depth+1)
			}
		}
		return
	}
	if !v.CanSet() {
		return
	}
	s := f.s
	switch t {
	case reflect.TypeFor[time.Time]():
		y := fuzzYears[s.n(len(fuzzYears))]
		off := (s.n(61) - 30) * 30 * 60 // ±15 h in half hours
		if s.n(16) == 15 {
			off = 25 * 3600
		}
		v.Set(reflect.ValueOf(time.Date(y, time.Month(1+s.n(12)), 1+s.n(31), s.n(24), s.n(60), s.n(60), s.n(4)*250_000_001,
			time.FixedZone("", off))))
		return
	case reflect.TypeFor[json.Number]():
		if s.n(4) == 0 {
			v.SetString(strconv.FormatUint(s.u64(), 10) + strings.Repeat("0", s.n(30)))
		} else {
			v.SetString(fuzzNumbers[s.n(len(fuzzNumbers))])
		}
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(s.n(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch s.n(4) {
		case 0:
			v.SetInt(int64(s.n(16)))
		case 1:
			v.SetInt(math.MinInt64)
		default:
			v.SetInt(int64(s.u64()))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if s.n(2) == 0 {
			v.SetUint(uint64(s.n(16)))
		} else {
			v.SetUint(s.u64())
		}
	case reflect.Float32, reflect.Float64:
		if s.n(4) == 0 {
			v.SetFloat(math.Float64frombits(s.u64()))
		} else {
			v.SetFloat(fuzzFloats[s.n(len(fuzzFloats))])
		}
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(complex(float64(s.n(3)), 0))
	case reflect.String:
		v.SetString(s.str())
	case reflect.Chan:
		if s.n(2) == 1 {
			v.Set(reflect.MakeChan(t, 0))
		}
	case reflect.Func:
		if s.n(2) == 1 {
			v.Set(reflect.MakeFunc(t, func([]reflect.Value) []reflect.Value { return nil }))
		}
	case reflect.Pointer:
		if depth > 6 || s.n(3) == 0 {
			return
		}
		if s.n(8) == 7 { // now and then, point back at a value being filled: a cycle
			for _, a := range f.ancestors {
				if a.Type() == t {
					v.Set(a)
					return
				}
			}
		}
		p := reflect.New(t.Elem())
		f.ancestors = append(f.ancestors, p)
		f.fill(p.Elem(), depth+1)
		f.ancestors = f.ancestors[:len(f.ancestors)-1]
		v.Set(p)
	case reflect.Interface:
		if depth > 6 {
			return
		}
		var x reflect.Value
		switch s.n(10) {
		case 0:
			return
		case 1:
			x = reflect.ValueOf(s.str())
		case 2:
			x = reflect.ValueOf(fuzzFloats[s.n(len(fuzzFloats))])
		case 3:
			x = reflect.ValueOf(json.Number(fuzzNumbers[s.n(len(fuzzNumbers))]))
		case 4:
			x = reflect.New(reflect.TypeFor[map[string]any]()).Elem()
		case 5:
			x = reflect.New(reflect.TypeFor[[]any]()).Elem()
		case 6:
			x = reflect.ValueOf(MJ{V: int8(s.byte())})
		case 7:
			x = reflect.ValueOf(&PMJ{V: s.n(9)})
			if s.n(4) == 3 {
				x = reflect.ValueOf((*PMJ)(nil))
			}
		case 8:
			x = reflect.ValueOf([]any{&Both{N: s.n(9)}, Both{N: s.n(9)}, TM(s.n(16)), (*PTM)(nil)}[s.n(4)])
		default:
			ft := fuzzTypes[s.n(len(fuzzTypes))]
			if s.n(2) == 0 {
				ft = reflect.PointerTo(ft)
			}
			x = reflect.New(ft).Elem()
		}
		if !x.Type().Implements(t) {
			return
		}
		y := reflect.New(x.Type()).Elem()
		y.Set(x)
		f.fill(y, depth+1)
		v.Set(y)
	case reflect.Map:
		if depth > 6 || s.n(4) == 0 {
			return
		}
		m := reflect.MakeMap(t)
		seen := map[string]bool{}
		for range s.n(4) {
			k := reflect.New(t.Key()).Elem()
			f.fill(k, depth+1)
			if t.Key().Kind() == reflect.Pointer && k.IsNil() && s.n(2) == 0 {
				k = reflect.New(t.Key().Elem()) // a non-nil pointer key
				f.fill(k.Elem(), depth+1)
			}
			// Keys that encoding/json would write alike make its output ambiguous; keep one.
			name, err := json.Marshal(reflect.MakeMapWithSize(t, 1).Interface())
			if err == nil {
				one := reflect.MakeMap(reflect.MapOf(t.Key(), reflect.TypeFor[int]()))
				one.SetMapIndex(k, reflect.ValueOf(0))
				if b, err := json.Marshal(one.Interface()); err == nil {
					name = b
				}
			}
			if seen[string(name)] {
				continue
			}
			seen[string(name)] = true
			e := reflect.New(t.Elem()).Elem()
			f.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		if s.n(10) == 9 && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Interface {
			m.SetMapIndex(reflect.ValueOf("self").Convert(t.Key()), m) // a map that holds itself
		}
		v.Set(m)
	case reflect.Slice:
		if depth > 6 || s.n(4) == 0 {
			return
		}
		n := s.n(4)
		sl := reflect.MakeSlice(t, n, n)
		for i := range n {
			f.fill(sl.Index(i), depth+1)
		}
		if n > 0 && s.n(10) == 9 && t.Elem().Kind() == reflect.Interface {
			sl.Index(n - 1).Set(sl) // a slice that holds itself
		}
		v.Set(sl)
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i), depth+1)
		}
	}
}

// build makes one argument from the input: a value of one of fuzzTypes, or a pointer to it.
func build(data []byte) any {
	s := &src{b: data}
	t := fuzzTypes[s.n(len(fuzzTypes))]
	byPointer := s.n(2) == 1
	p := reflect.New(t)
	f := &filler{s: s, ancestors: []reflect.Value{p}}
	f.fill(p.Elem(), 0)
	if byPointer {
		return p.Interface()
	}
	return p.Elem().Interface()
}

// marshal is encoding/json's answer; a panic (e.g. in MarshalJSON on a nil pointer) is a refusal.
func marshal(v any) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("encoding/json panicked: %v", r)
		}
	}()
	return json.Marshal(v)
}

// normal decodes JSON and normalises what the canonical form writes differently on
// purpose: numbers by value (1e-07 = 1e-7 = 0.0000001), times in UTC.
func normal(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return norm(x)
}

func norm(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			x[k] = norm(v)
		}
	case []any:
		for i, v := range x {
			x[i] = norm(v)
		}
	case json.Number:
		return numberValue(string(x))
	case string:
		if tm, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return tm.UTC().Format(time.RFC3339Nano) // the form canon writes, also for a UTC year past 0–9999
		}
	}
	return x
}

// numberValue writes a JSON number as sign, significant digits and exponent.
func numberValue(n string) string {
	neg := strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(n), "e")
	e := new(big.Int)
	if exp != "" {
		e.SetString(strings.TrimPrefix(exp, "+"), 10)
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	e.Sub(e, big.NewInt(int64(len(frac))))
	trimmed := strings.TrimLeft(digits, "0")
	if trimmed == "" {
		return "0"
	}
	t := strings.TrimRight(trimmed, "0")
	e.Add(e, big.NewInt(int64(len(trimmed)-len(t))))
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + t + "e" + e.String()
}

// FuzzCanonMatchesJSON: for values of many shapes, the canonical form is the JSON
// value encoding/json writes (object keys sorted, numbers by value, times in UTC), or
// both refuse; it is the same on a second encoding; and Field reads each top-level
// field as encoding/json wrote it.
func FuzzCanonMatchesJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		v := build(data)
		args := []any{v}
		got, cerr := canon.Encode(nil, args)
		want, jerr := marshal(args)
		if (cerr == nil) != (jerr == nil) {
			t.Fatalf("%T: canon error %v, encoding/json error %v\ncanon: %s\njson:  %s", v, cerr, jerr, got, want)
		}
		if cerr != nil {
			var ce *canon.Error
			if !errors.As(cerr, &ce) {
				t.Fatalf("canon error %v is not a *canon.Error", cerr)
			}
			return
		}
		if g, w := normal(t, got), normal(t, want); !reflect.DeepEqual(g, w) {
			t.Fatalf("%T:\ncanon: %s\njson:  %s", v, got, want)
		}
		again, err := canon.Encode(nil, args)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("a second encoding differs: %s vs %s (%v)", again, got, err)
		}
		obj, ok := normal(t, want).([]any)[0].(map[string]any)
		st := reflect.Indirect(reflect.ValueOf(v)).Type()
		if !ok || st.Kind() != reflect.Struct || reflect.PointerTo(st).Implements(reflect.TypeFor[json.Marshaler]()) ||
			reflect.PointerTo(st).Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
			return // not written as its fields
		}
		for name, w := range obj {
			fv, found, err := canon.Field(args, name)
			if err != nil || !found {
				t.Fatalf("Field(%q) = %v %v; encoding/json wrote it", name, found, err)
			}
			if g := normal(t, fv); !reflect.DeepEqual(g, w) {
				t.Fatalf("Field(%q) = %s, encoding/json wrote %v", name, fv, w)
			}
		}
	})
}
