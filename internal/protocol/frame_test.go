package protocol

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
)

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// loopReader replays b forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	msgs := sampleMessages(t)
	for i, m := range msgs {
		if err := enc.Encode(uint64(i)+1, m); err != nil {
			t.Fatalf("Encode(%s): %v", m.Type(), err)
		}
	}
	dec := NewDecoder(&buf)
	for i, want := range msgs {
		f, err := dec.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame %d: %v", i, err)
		}
		if f.Version != Version || f.Type != want.Type() || f.RequestID != uint64(i)+1 || int(f.Length) != len(f.Payload) {
			t.Fatalf("frame %d header = %+v", i, f.Header)
		}
		got, err := f.Message()
		if err != nil {
			t.Fatalf("Message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("frame %d:\n got %#v\nwant %#v", i, got, want)
		}
	}
	for range 2 {
		if _, err := dec.ReadFrame(); err != io.EOF {
			t.Fatalf("ReadFrame at end = %v, want io.EOF (every time)", err)
		}
	}
}

// A stream cut at any offset gives io.EOF at a frame boundary and
// io.ErrUnexpectedEOF inside a frame, after the complete frames.
func TestReadFrameTruncatedStream(t *testing.T) {
	var stream []byte
	boundaries := map[int]bool{0: true}
	for i, m := range sampleMessages(t) {
		stream = append(stream, mustFrame(t, uint64(i)+1, m)...)
		boundaries[len(stream)] = true
	}
	for cut := 0; cut <= len(stream); cut++ {
		dec := NewDecoder(bytes.NewReader(stream[:cut]))
		read := 0
		var err error
		for {
			var f Frame
			if f, err = dec.ReadFrame(); err != nil {
				break
			}
			read += HeaderSize + len(f.Payload)
		}
		want := io.ErrUnexpectedEOF
		if boundaries[cut] {
			want = io.EOF
		}
		if err != want {
			t.Fatalf("cut at %d: ReadFrame = %v, want %v", cut, err, want)
		}
		if cut-read >= HeaderSize+MaxPayload || (want == io.EOF && read != cut) {
			t.Fatalf("cut at %d: read %d bytes of complete frames", cut, read)
		}
	}
}

func TestBadMagic(t *testing.T) {
	for _, magic := range []string{"TLN1", "GET ", "\x00\x00\x00\x00", "tlnc"} {
		b := mustFrame(t, 1, &Ping{})
		copy(b, magic)
		b = append(b, make([]byte, 100)...)
		cr := &countingReader{r: bytes.NewReader(b)}
		dec := NewDecoder(cr)
		_, err := dec.ReadFrame()
		wantErrIs(t, err, ErrBadMagic)
		if cr.n != HeaderSize {
			t.Fatalf("magic %q: read %d bytes, want only the %d byte header", magic, cr.n, HeaderSize)
		}
		if _, err2 := dec.ReadFrame(); err2 != err {
			t.Fatalf("ReadFrame after bad magic = %v, want the same error %v", err2, err)
		}
		if CodeOf(err) != CodeInvalidArgument || FrameErrorReply(err) != nil {
			t.Fatalf("bad magic: code %v, reply %v; want invalid_argument and no reply", CodeOf(err), FrameErrorReply(err))
		}
	}
}

// An unsupported version, older or newer, is refused from the header
// alone: the payload (here garbage that would fail to decode) is never read.
func TestUnsupportedVersionRejectedBeforePayload(t *testing.T) {
	garbage := bytes.Repeat([]byte{0xff}, 300)
	for _, v := range []uint16{0, 2, 0xffff} {
		for _, typ := range []Type{TypeHeartbeat, TypePing, 0x4242} {
			b := rawFrame(v, typ, 77, garbage)
			cr := &countingReader{r: bytes.NewReader(b)}
			f, err := NewDecoder(cr).ReadFrame()
			wantErrIs(t, err, ErrUnsupportedVersion)
			var ve *VersionError
			if !errors.As(err, &ve) || ve.Version != v {
				t.Fatalf("version %d: error %v is not *VersionError{%d}", v, err, v)
			}
			wantContains(t, err, "version 1")
			if cr.n != HeaderSize {
				t.Fatalf("version %d: read %d bytes, want only the header", v, cr.n)
			}
			if f.RequestID != 77 || f.Type != typ || f.Version != v || f.Payload != nil {
				t.Fatalf("version %d: frame = %+v, want the header with request ID 77 and no payload", v, f)
			}
			if _, err := (Frame{Header: Header{Version: v, Type: typ}, Payload: garbage}).Message(); !errors.As(err, &ve) {
				t.Fatalf("Frame.Message at version %d = %v, want *VersionError", v, err)
			}
		}
	}
}

// The Error layout is frozen, so an Error frame of any version is read.
func TestErrorFrameReadableAtEveryVersion(t *testing.T) {
	want := &Error{Code: CodeUnsupportedVersion, MinVersion: 2, MaxVersion: 3, Message: "protocol schema version 1 is not supported (this build speaks versions 2 to 3)"}
	for _, v := range []uint16{0, 1, 2, 9, 0xffff} {
		b := rawFrame(v, TypeError, 5, mustAppend(t, want))
		f, err := NewDecoder(bytes.NewReader(b)).ReadFrame()
		if err != nil {
			t.Fatalf("version %d: ReadFrame: %v", v, err)
		}
		got, err := f.Message()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("version %d: Message = %#v, %v", v, got, err)
		}
	}
	// A foreign Error frame is bounded by the frozen layout's maximum.
	b := rawFrame(2, TypeError, 5, make([]byte, maxErrorPayload+1))
	_, err := NewDecoder(bytes.NewReader(b)).ReadFrame()
	var tl *FrameTooLargeError
	if !errors.As(err, &tl) || tl.Limit != maxErrorPayload {
		t.Fatalf("oversize foreign Error frame: %v, want *FrameTooLargeError with limit %d", err, maxErrorPayload)
	}
}

func TestFrameOverCapNotRead(t *testing.T) {
	for _, length := range []uint32{MaxPayload + 1, 1 << 31, 1<<32 - 1} {
		b := AppendHeader(nil, Header{Version: Version, Type: TypeHeartbeat, RequestID: 9, Length: length})
		b = append(b, make([]byte, 1000)...)
		cr := &countingReader{r: bytes.NewReader(b)}
		dec := NewDecoder(cr)
		f, err := dec.ReadFrame()
		wantErrIs(t, err, ErrFrameTooLarge)
		var tl *FrameTooLargeError
		if !errors.As(err, &tl) || tl.Length != length || tl.Limit != MaxPayload || tl.Type != TypeHeartbeat {
			t.Fatalf("length %d: error %#v", length, err)
		}
		wantContains(t, err, "exceeds the 65536 byte limit")
		if cr.n != HeaderSize || f.RequestID != 9 {
			t.Fatalf("length %d: read %d bytes, request ID %d; want the header only and ID 9", length, cr.n, f.RequestID)
		}
		if cap(dec.buf) > 512 {
			t.Fatalf("length %d: decoder grew its buffer to %d", length, cap(dec.buf))
		}
		reply := FrameErrorReply(err)
		if reply == nil || reply.Code != CodeTooLarge || reply.Retryable {
			t.Fatalf("reply = %+v, want too_large, not retryable", reply)
		}
	}
}

func TestFrameAtCapIsRead(t *testing.T) {
	b := rawFrame(Version, TypeHeartbeat, 1, make([]byte, MaxPayload))
	dec := NewDecoder(bytes.NewReader(b))
	f, err := dec.ReadFrame()
	if err != nil || len(f.Payload) != MaxPayload {
		t.Fatalf("ReadFrame(payload at cap) = %d bytes, %v", len(f.Payload), err)
	}
	if cap(dec.buf) > MaxFrame {
		t.Fatalf("decoder buffer cap %d exceeds MaxFrame %d", cap(dec.buf), MaxFrame)
	}
	// The frame is framed correctly; the message inside is not valid.
	if _, err := f.Message(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Message = %v, want ErrMalformed", err)
	}
}

func TestReservedFlags(t *testing.T) {
	for _, typ := range []Type{TypePing, TypeError} {
		b := mustFrame(t, 1, &Ping{})
		b[6], b[7] = 0, byte(typ)
		b[11] = 1
		_, err := NewDecoder(bytes.NewReader(b)).ReadFrame()
		wantErrIs(t, err, ErrBadHeader)
		if reply := FrameErrorReply(err); reply == nil || reply.Code != CodeInvalidArgument {
			t.Fatalf("reply = %+v, want invalid_argument", reply)
		}
	}
}

func TestParseHeaderShort(t *testing.T) {
	_, err := ParseHeader(make([]byte, HeaderSize-1))
	wantErrIs(t, err, io.ErrUnexpectedEOF)
}

type bigMessage struct{ n int }

func (*bigMessage) Type() Type { return TypeHeartbeat }
func (m *bigMessage) AppendBinary(b []byte) ([]byte, error) {
	return append(b, make([]byte, m.n)...), nil
}
func (*bigMessage) UnmarshalBinary([]byte) error { return nil }

func TestAppendFrameTooLarge(t *testing.T) {
	prefix := []byte("keep")
	b, err := AppendFrame(prefix, 1, &bigMessage{n: MaxPayload + 1})
	wantErrIs(t, err, ErrFrameTooLarge)
	if string(b) != "keep" {
		t.Fatalf("AppendFrame left %q, want the buffer unchanged", b)
	}
	var w bytes.Buffer
	if err := NewEncoder(&w).Encode(1, &bigMessage{n: MaxPayload + 1}); !errors.Is(err, ErrFrameTooLarge) || w.Len() != 0 {
		t.Fatalf("Encode(too large) = %v and wrote %d bytes", err, w.Len())
	}
	if _, err := AppendFrame(nil, 1, &bigMessage{n: MaxPayload}); err != nil {
		t.Fatalf("AppendFrame(at cap) = %v", err)
	}
	if err := NewEncoder(&w).Encode(1, &Ack{}); !errors.Is(err, ErrInvalidValue) || w.Len() != 0 {
		t.Fatalf("Encode(invalid) = %v and wrote %d bytes", err, w.Len())
	}
}

// scriptReader returns its chunks one per Read, with a deadline error
// wherever a chunk is nil.
type scriptReader struct{ chunks [][]byte }

func (s *scriptReader) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	c := s.chunks[0]
	if c == nil {
		s.chunks = s.chunks[1:]
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, c)
	if n == len(c) {
		s.chunks = s.chunks[1:]
	} else {
		s.chunks[0] = c[n:]
	}
	return n, nil
}

func TestDecoderResumesAfterDeadline(t *testing.T) {
	want := &PlacementLookup{Key: []byte("bucket/key"), Replicas: 2}
	b := mustFrame(t, 3, want)
	sr := &scriptReader{chunks: [][]byte{nil, b[:10], nil, b[10:26], nil, nil, b[26:]}}
	dec := NewDecoder(sr)
	deadlines := 0
	for {
		f, err := dec.ReadFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			deadlines++
			continue
		}
		if err != nil {
			t.Fatalf("ReadFrame: %v", err)
		}
		got, err := f.Message()
		if err != nil || !reflect.DeepEqual(got, want) || f.RequestID != 3 {
			t.Fatalf("resumed frame = %+v %#v, %v", f.Header, got, err)
		}
		break
	}
	if deadlines != 4 {
		t.Fatalf("saw %d deadline errors, want 4", deadlines)
	}
	if _, err := dec.ReadFrame(); err != io.EOF {
		t.Fatalf("ReadFrame at end = %v, want io.EOF", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestDecoderNoProgress(t *testing.T) {
	_, err := NewDecoder(zeroReader{}).ReadFrame()
	wantErrIs(t, err, io.ErrNoProgress)
}

func TestDecoderReset(t *testing.T) {
	dec := NewDecoder(bytes.NewReader([]byte("XXXX")))
	if _, err := dec.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("ReadFrame = %v", err)
	}
	dec.Reset(bytes.NewReader(mustFrame(t, 1, &Pong{})))
	if f, err := dec.ReadFrame(); err != nil || f.Type != TypePong {
		t.Fatalf("after Reset: %+v, %v", f, err)
	}
}

func TestFramingDoesNotAllocate(t *testing.T) {
	hb := &Heartbeat{Record: encodedRecord(t, testRecord())}
	frame := mustFrame(t, 1, hb)
	dec := NewDecoder(&loopReader{b: frame})
	var got Heartbeat
	read := func() {
		f, err := dec.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if err := got.UnmarshalBinary(f.Payload); err != nil {
			t.Fatal(err)
		}
	}
	read() // warm up the buffers
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Fatalf("ReadFrame+UnmarshalBinary of a Heartbeat: %v allocations per frame, want 0", n)
	}
	enc := NewEncoder(io.Discard)
	write := func() {
		if err := enc.Encode(1, hb); err != nil {
			t.Fatal(err)
		}
	}
	write()
	if n := testing.AllocsPerRun(100, write); n != 0 {
		t.Fatalf("Encode of a Heartbeat: %v allocations per frame, want 0", n)
	}
}
