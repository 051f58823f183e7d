package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// marshalV1 is the stored form as it was written before appendRecord:
// encoding/json's Marshal of the envelope.
func marshalV1(t testing.TB, r *Record) []byte {
	t.Helper()
	b, err := json.Marshal(envelope{SchemaVersion: SchemaVersion, Record: r})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// codecRecords are records whose encodings must not change: the typical
// heartbeat, the limits, and the characters JSON escapes.
func codecRecords() map[string]*Record {
	recs := map[string]*Record{
		"valid":     validRecord(),
		"heartbeat": heartbeatRecord(42, 7),
		"max":       maxRecord(),
	}
	r := validRecord()
	r.Labels = nil
	recs["nil labels"] = r
	r = validRecord()
	r.Labels = map[string]string{}
	recs["empty labels"] = r
	r = validRecord()
	r.Labels = map[string]string{
		"html":    `<script>&"quoted"</script>`,
		"slash":   `back\slash /slash`,
		"unicode": "zürich 東京 🚀 ß",
		"lsep":    "a\u2028b\u2029c",
		"empty":   "",
		"zone":    "eu-west-1a",
		"a.b/c-d": "e_f",
	}
	r.Version = `v1 <dev> & "nightly"`
	r.IncarnationID = "inc-ü-\u2028"
	recs["escapes"] = r
	r = validRecord()
	r.Counters = Counters{}
	r.Capacity = Capacity{}
	r.StartTimeUnixMs, r.UpdatedAtUnixMs, r.HeartbeatSeq = 0, 0, 0
	r.AdminAddress = ""
	r.Ready = false
	recs["zero counters"] = r
	r = validRecord()
	r.Capacity = Capacity{CapacityBytes: math.MaxUint64, ResidentBytes: math.MaxUint64, Blocks: 1, Pages: 2, InflightLoads: 3, StoreHealthy: true}
	r.Counters = Counters{RequestsTotal: math.MaxUint64, ErrorsTotal: 1, HitsTotal: 2, MissesTotal: 3, BytesServedTotal: 4,
		BackendFetchesTotal: 5, BackendErrorsTotal: 6, EvictionsTotal: 7, PlacementLookupsTotal: 8, PlacementErrorsTotal: 9,
		StoreErrorsTotal: 10}
	r.StartTimeUnixMs, r.UpdatedAtUnixMs, r.HeartbeatSeq = math.MaxInt64, math.MaxInt64, math.MaxUint64
	r.Generation = math.MaxUint64
	r.Superseded = []string{"a", "b<c", "d"}
	r.Role = RoleCoordinator
	r.Health = HealthDegraded
	recs["every field"] = r
	r = maxRecord()
	for k := range r.Labels {
		r.Labels[k] = strings.Repeat("<", MaxLabelValueBytes)
	}
	recs["escaped max"] = r // over the size limit: Encode refuses it
	return recs
}

func TestAppendRecordMatchesMarshal(t *testing.T) {
	for name, r := range codecRecords() {
		t.Run(name, func(t *testing.T) {
			want := marshalV1(t, r)
			if got := appendRecord(nil, r); !bytes.Equal(got, want) {
				t.Fatalf("appendRecord:\n got %s\nwant %s", got, want)
			}
			if !bytes.HasPrefix(want, canonicalPrefix) {
				t.Fatalf("encoding does not start with %s", canonicalPrefix)
			}
			got, err := Encode(r)
			if len(want) > MaxRecordBytes {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "record" {
					t.Fatalf("Encode(%d bytes) = %v, want the record size error", len(want), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Encode:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestAppendRecordCoversEveryField fills every field of Record with
// random values by reflection, so a field added to Record (or a changed
// tag) that appendRecord does not write the same way fails here.
func TestAppendRecordCoversEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var r Record
		fill(rng, reflect.ValueOf(&r).Elem())
		want := marshalV1(t, &r)
		if got := appendRecord(nil, &r); !bytes.Equal(got, want) {
			t.Fatalf("record %d: appendRecord:\n got %s\nwant %s", i, got, want)
		}
	}
}

// fill sets v to a random value, zero about a quarter of the time so that
// omitempty is exercised.
func fill(rng *rand.Rand, v reflect.Value) {
	if rng.IntN(4) == 0 {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randString(rng))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(rng.Int64() - math.MaxInt64/2)
	case reflect.Uint64:
		v.SetUint(rng.Uint64() >> rng.IntN(64))
	case reflect.Struct:
		for i := range v.NumField() {
			fill(rng, v.Field(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(MaxLabels + 2) {
			m.SetMapIndex(reflect.ValueOf(randString(rng)), reflect.ValueOf(randString(rng)))
		}
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), rng.IntN(5), rng.IntN(5)+5)
		for i := range s.Len() {
			fill(rng, s.Index(i))
		}
		v.Set(s)
	default:
		panic(fmt.Sprintf("fill: add a case for %v", v.Type()))
	}
}

func randString(rng *rand.Rand) string {
	const alphabet = "abcXYZ019 .-_/<>&\"\\\x00\x1f\x7f\u00e9\u2028\u2029\u202e\U0001F680\xff\xc3"
	runes := []rune(alphabet)
	var sb strings.Builder
	for range rng.IntN(12) {
		if rng.IntN(8) == 0 {
			sb.WriteByte(byte(rng.IntN(256))) // any byte, invalid UTF-8 included
			continue
		}
		sb.WriteRune(runes[rng.IntN(len(runes))])
	}
	return sb.String()
}

// FuzzAppendString holds appendString to encoding/json's string encoding
// for arbitrary bytes.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"\`, "<>&", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xc3(", "é東🚀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// decodeV1 is Decode as it was before go-json-experiment, on
// encoding/json: the reference FuzzDecodeDifferential compares with. It
// also reports whether the input had data after the first JSON value that
// the old Decoder.More check let through (a '}' or ']'): Decode now refuses
// that, deliberately.
func decodeV1(b []byte) (r *Record, err error, lenientTrailer bool) {
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("%w: too large", ErrMalformed), false
	}
	if !bytes.HasPrefix(b, canonicalPrefix) {
		var probe versionProbe
		if err := json.Unmarshal(b, &probe); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err), false
		}
		if probe.SchemaVersion == nil {
			return nil, fmt.Errorf("%w: schemaVersion is missing", ErrMalformed), false
		}
		if *probe.SchemaVersion != SchemaVersion {
			return nil, &VersionError{Version: *probe.SchemaVersion}, false
		}
	}
	r = &Record{}
	env := envelope{Record: r}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err), false
	}
	if env.SchemaVersion != SchemaVersion {
		return nil, &VersionError{Version: env.SchemaVersion}, false
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the record", ErrMalformed), false
	}
	lenientTrailer = len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) > 0
	if err := r.ValidateFields(); err != nil {
		return nil, err, lenientTrailer
	}
	return r, nil, lenientTrailer
}

// errorClass names the sentinel an error wraps, and the version of a
// VersionError.
func errorClass(err error) string {
	var ve *VersionError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ve):
		return fmt.Sprintf("version %d", ve.Version)
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	}
	return "other: " + err.Error()
}

func checkSameDecode(t *testing.T, b []byte) {
	t.Helper()
	want, wantErr, lenient := decodeV1(b)
	got, gotErr := Decode(b)
	if lenient {
		// The one deliberate difference: data after the record is
		// refused even when it starts with '}' or ']'.
		if !errors.Is(gotErr, ErrMalformed) {
			t.Fatalf("Decode(%q) with trailing data = %v, want ErrMalformed", b, gotErr)
		}
		return
	}
	if gc, wc := errorClass(gotErr), errorClass(wantErr); gc != wc {
		t.Fatalf("Decode(%q) error = %v (%s), encoding/json gave %v (%s)", b, gotErr, gc, wantErr, wc)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) =\n %#v\nencoding/json gave\n %#v", b, got, want)
	}
	if got == nil {
		return
	}
	// The re-encoding (what a coordinator stores) is encoding/json's.
	wantEnc := marshalV1(t, want)
	gotEnc, err := Encode(got)
	switch {
	case len(wantEnc) > MaxRecordBytes:
		if err == nil {
			t.Fatalf("Encode(Decode(%q)) of %d bytes encoded: no error", b, len(wantEnc))
		}
	case err != nil:
		t.Fatalf("Encode(Decode(%q)): %v", b, err)
	case !bytes.Equal(gotEnc, wantEnc):
		t.Fatalf("Encode(Decode(%q)):\n got %s\nwant %s", b, gotEnc, wantEnc)
	}
}

// checkCanonical checks the hand-written decoder against the general one
// on b: when decodeCanonical reads b, decodeGeneral must read it too, to
// the same record.
func checkCanonical(t *testing.T, b []byte) *Record {
	t.Helper()
	got, labelsValid := decodeCanonical(b)
	if got == nil {
		return nil
	}
	if err := ValidateLabels(got.Labels); labelsValid && err != nil {
		t.Fatalf("decodeCanonical(%q) found the labels valid, ValidateLabels says %v", b, err)
	}
	want, err := decodeGeneral(b)
	if err != nil {
		t.Fatalf("decodeCanonical(%q) read a record, decodeGeneral refused it: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeCanonical(%q) =\n %#v\ndecodeGeneral gave\n %#v", b, got, want)
	}
	return got
}

// FuzzDecodeCanonical holds the hand-written decoder to the general one
// (and so to encoding/json, which FuzzDecodeDifferential holds the general
// one to): on any input it reads, the same record. Mutations of canonical
// encodings reach the shapes it must leave to the general decoder.
func FuzzDecodeCanonical(f *testing.F) {
	for _, r := range codecRecords() {
		f.Add(appendRecord(nil, r))
	}
	for _, s := range decodeCases() {
		f.Add([]byte(s))
	}
	for _, s := range canonicalCases() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkCanonical(t, b)
		checkSameDecode(t, b)
	})
}

// canonicalCases are near misses of the canonical shape: each must be
// read by the general decoder, or refused by both, with the same answer.
func canonicalCases() []string {
	good := string(appendRecord(nil, validRecord()))
	body := good[len(canonicalPrefix):]
	rep := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	return []string{
		good[:len(good)-1],
		good + " ",
		`{"schemaVersion":1,}`,
		`{"schemaVersion":1,"nodeId":"a"}`,
		`{"schemaVersion":1,"nodeId":"a","clusterId":"b"}`,
		`{"schemaVersion":1,"nodeId":"a","nodeId":"b"}`,
		`{"schemaVersion":1,"capacity":{},"counters":{},"labels":{},"superseded":[]}`,
		`{"schemaVersion":1,"capacity":{"blocks":1,"capacityBytes":2}}`,
		`{"schemaVersion":1,"labels":{"a":"1","a":"2"}}`,
		`{"schemaVersion":1,"labels":{"a":"1",}}`,
		`{"schemaVersion":1,"superseded":["a",]}`,
		`{"schemaVersion":1,"superseded":["a","b","c","d","e","f"]}`,
		`{"schemaVersion":1,"late":truex}`,
		`{"schemaVersion":1,"late":tru}`,
		`{"schemaVersion":1,"generation":18446744073709551615}`,
		`{"schemaVersion":1,"generation":18446744073709551616}`,
		`{"schemaVersion":1,"generation":99999999999999999999}`,
		`{"schemaVersion":1,"generation":184467440737095516150}`,
		`{"schemaVersion":1,"startTimeUnixMs":9223372036854775807}`,
		`{"schemaVersion":1,"startTimeUnixMs":9223372036854775808}`,
		`{"schemaVersion":1,"startTimeUnixMs":-1}`,
		`{"schemaVersion":1,"startTimeUnixMs":-0}`,
		`{"schemaVersion":1,"generation":00}`,
		`{"schemaVersion":1,"generation":0}`,
		`{"schemaVersion":1,"generation":1.5}`,
		`{"schemaVersion":1,"generation":1e2}`,
		`{"schemaVersion":1,"generation":null}`,
		`{"schemaVersion":1,"version":"ab"}`,
		"{\"schemaVersion\":1,\"version\":\"a\tb\"}",
		"{\"schemaVersion\":1,\"version\":\"\xc3\"}",
		"{\"schemaVersion\":1,\"version\":\"\u00e9\u2028\"}",
		`{"schemaVersion":1,"role":"worker","health":"healthy"}`,
		`{"schemaVersion":1,"role":"boss","health":"ok"}`,
		`{"schemaVersion":1,"Role":"worker"}`,
		`{"schemaVersion":1,"schemaVersion":2}`,
		`{"schemaVersion":1,"future":1}`,
		`{"schemaVersion":1,` + body + body,
		rep(`"labels":{`, `"labels":{"x":"y",`),
		rep(`,"counters":{`, `,"counters":{"storeErrorsTotal":1,`),
	}
}

// TestDecodeCanonicalReadsEncode checks that what Encode writes takes the
// hand-written path (the heartbeat path's budget depends on it) when no
// string needs escaping, to the record encoded.
func TestDecodeCanonicalReadsEncode(t *testing.T) {
	for name, r := range codecRecords() {
		t.Run(name, func(t *testing.T) {
			b := appendRecord(nil, r)
			got := checkCanonical(t, b)
			escaped := bytes.IndexByte(b, '\\') >= 0
			switch {
			case escaped && got != nil:
				t.Fatalf("decodeCanonical read an escape in %s", b)
			case escaped:
				return
			case got == nil:
				t.Fatalf("decodeCanonical left Encode's output to the general decoder: %s", b)
			}
			want := r.Clone()
			if len(want.Labels) == 0 {
				want.Labels = nil // omitempty
			}
			if len(want.Superseded) == 0 {
				want.Superseded = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decodeCanonical(Encode(r)) =\n %#v\nwant\n %#v", got, want)
			}
		})
	}
	for _, s := range canonicalCases() {
		t.Run(s, func(t *testing.T) {
			checkCanonical(t, []byte(s))
			checkSameDecode(t, []byte(s))
		})
	}
}

// FuzzDecodeDifferential checks that Decode accepts and refuses what the
// encoding/json decoder did, with the same error class and the same
// record.
func FuzzDecodeDifferential(f *testing.F) {
	for _, r := range codecRecords() {
		f.Add(appendRecord(nil, r))
	}
	for _, s := range decodeCases() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSameDecode(t, b)
	})
}

// decodeCases are inputs on which encoding/json v1's quirks show.
func decodeCases() []string {
	good := string(appendRecord(nil, validRecord()))
	body := good[len(canonicalPrefix):]
	return []string{
		good,
		`{"schemaVersion":1}`,
		`{"schemaVersion":2}`,
		`{}`,
		good + "}",
		good + " ]",
		good + " x",
		good + "{}",
		good + " \n",
		`{"schemaVersion":1,"schemaVersion":2,` + body,
		`{"schemaVersion":1,"schemaVersion":2,` + body + "x",
		`{"schemaVersion":1,"schemaVersion":null,` + body,
		`{"SchemaVersion":1,` + body,
		`{"SCHEMAVERSION":2,` + body,
		`{"ſchemaVersion":1,` + body, // U+017F folds to 's'
		`{"schema_version":1,` + body,
		strings.Replace(good, `"nodeId"`, `"NodeID"`, 1),
		strings.Replace(good, `"nodeId"`, `"node_id"`, 1),
		strings.Replace(good, `"nodeId":"worker-1"`, `"nodeId":"worker-1","nodeid":"worker-2"`, 1),
		strings.Replace(good, `"nodeId":"worker-1"`, `"nodeId":"worker-1","nodeId":null`, 1),
		strings.Replace(good, `"labels":{`, `"labels":{"a":"1"},"labels":{`, 1),
		strings.Replace(good, `"labels":{`, `"labels":{"k":null,`, 1),
		strings.Replace(good, `"labels":{`, `"labels":null,"labels":{`, 1),
		strings.Replace(good, `"capacity":{`, `"capacity":{"blocks":9},"capacity":{`, 1),
		strings.Replace(good, `"capacity":{`, `"capacity":null,"capacity":{`, 1),
		strings.Replace(good, `"ready":true`, `"ready":null`, 1),
		strings.Replace(good, `"heartbeatSeq":7`, `"heartbeatSeq":7.0`, 1),
		strings.Replace(good, `"heartbeatSeq":7`, `"heartbeatSeq":-7`, 1),
		strings.Replace(good, `"heartbeatSeq":7`, `"heartbeatSeq":1e3`, 1),
		strings.Replace(good, `"heartbeatSeq":7`, `"heartbeatSeq":18446744073709551616`, 1),
		strings.Replace(good, `"version":"v1.2.3"`, "\"version\":\"v1\xff\"", 1), // invalid UTF-8 becomes U+FFFD
		strings.Replace(good, `"version":"v1.2.3"`, `"version":"v1\ud800"`, 1),
		strings.Replace(good, `"version":"v1.2.3"`, `"version":"v\u0031"`, 1),
		strings.Replace(good, `"labels":{`, `"superseded":["a"],"superseded":["b","c"],"labels":{`, 1),
		strings.Replace(good, `"labels":{`, `"superseded":["a","b"],"superseded":null,"labels":{`, 1),
		strings.Replace(good, `"labels":{`, `"futureField":{"a":[1,2,{"b":null}]},"labels":{`, 1),
		strings.Replace(good, `"role":"worker"`, `"role":"boss"`, 1),
		strings.Replace(good, `"heartbeatSeq":7`, `"heartbeatSeq":"7"`, 1),
		`{"schemaVersion":1,"nodeId":12345}`,
		`{"schemaVersion":2,"nodeId":12345,"labels":"not a map"}`,
		` {"schemaVersion":1,` + body,
		`{"schemaVersion":1.0,` + body,
		`{"schemaVersion":"1",` + body,
		`{"schemaVersion":1,` + body[:len(body)/2],
		"\x00\x01",
		"",
		"null",
		`[]`,
	}
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for i, s := range decodeCases() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkSameDecode(t, []byte(s)) })
	}
}

// FuzzValidateText holds the allocation-free textOK to the rules
// textError reports.
func FuzzValidateText(f *testing.F) {
	for _, s := range []string{"", "v1.2.3", "a\nb", "x\u007f", "\u0085", "a\u202eb", "\xff", "é東🚀", strings.Repeat("v", 300)} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, required bool) {
		ok := textOK(s, MaxVersionBytes, required)
		err := textError("version", s, MaxVersionBytes, required)
		if ok != (err == nil) {
			t.Fatalf("textOK(%q) = %v, textError = %v", s, ok, err)
		}
	})
}

// FuzzBytePrefixes holds the word-at-a-time scans to their byte-at-a-time
// definitions.
func FuzzBytePrefixes(f *testing.F) {
	for _, s := range []string{"", "plain ascii text", "0123456789abcdef<", "abcdefgh\x7f", "abcdefg\"h", "abcdefghij\\", "\u00e9t\u00e9", "abcdefgh\x1f", "~~~~~~~~~~~~~~~~\x80"} {
		f.Add(s)
	}
	prefix := func(s string, in func(c byte) bool) int {
		for i := 0; i < len(s); i++ {
			if !in(s[i]) {
				return i
			}
		}
		return len(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainPrefix(s), prefix(s, func(c byte) bool { return c >= 0x20 && c < 0x7f }); got != want {
			t.Errorf("plainPrefix(%q) = %d, want %d", s, got, want)
		}
		if got, want := jsonPlainPrefix(s), prefix(s, func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }); got != want {
			t.Errorf("jsonPlainPrefix(%q) = %d, want %d", s, got, want)
		}
		html := func(c byte) bool { return c >= 0x20 && c < 0x80 && !strings.ContainsRune(`"\<>&`, rune(c)) }
		if got, want := htmlSafePrefix(s), prefix(s, html); got != want {
			t.Errorf("htmlSafePrefix(%q) = %d, want %d", s, got, want)
		}
	})
}

// FuzzValidateIDs holds the table-driven checks of identifiers and label
// keys to the rules their errors state.
func FuzzValidateIDs(f *testing.F) {
	for _, s := range []string{"", "a", "worker-1", "-a", "a-", "a/b", "topology.kubernetes.io/zone", "a b", "é", strings.Repeat("a", 64)} {
		f.Add(s)
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	rule := func(s string, max int, extra string, alnumLast bool) bool {
		if s == "" || len(s) > max || !alnum(s[0]) || (alnumLast && !alnum(s[len(s)-1])) {
			return false
		}
		for i := 0; i < len(s); i++ {
			if !alnum(s[i]) && !strings.ContainsRune(extra, rune(s[i])) {
				return false
			}
		}
		return true
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err, want := ValidateID("nodeId", s), rule(s, MaxIDBytes, "._-", false); (err == nil) != want {
			t.Errorf("ValidateID(%q) = %v, rule says valid %v", s, err, want)
		}
		if err, want := ValidateLabelKey(s), rule(s, MaxLabelKeyBytes, "._-/", true); (err == nil) != want {
			t.Errorf("ValidateLabelKey(%q) = %v, rule says valid %v", s, err, want)
		}
	})
}
