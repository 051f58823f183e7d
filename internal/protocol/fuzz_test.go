package protocol

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzDecodeMessage: decoding never panics; what decodes re-encodes to
// exactly the same bytes (the encoding is canonical) and decodes again to
// an equal message; every failure is a classified error.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range append(sampleMessages(f), goldenMessages()...) {
		f.Add(uint16(m.Type()), mustAppend(f, m))
	}
	f.Add(uint16(TypePlacementResponse), cat(make([]byte, 8), u16(65535)))
	f.Add(uint16(TypeError), cat(u16(0xffff), []byte{1}, u16(0), u16(0xffff), str16("é")))
	f.Fuzz(func(t *testing.T, typ uint16, payload []byte) {
		m, err := Decode(Type(typ), payload)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned a message with error %v", err)
			}
			var fe *FieldError
			if !errors.Is(err, ErrUnknownType) && !(errors.As(err, &fe) && errors.Is(err, ErrMalformed)) {
				t.Fatalf("unclassified decode error %T: %v", err, err)
			}
			return
		}
		b, err := m.AppendBinary(nil)
		if err != nil {
			t.Fatalf("decoded %s does not re-encode: %v", m.Type(), err)
		}
		if !bytes.Equal(b, payload) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", payload, b)
		}
		m2, err := Decode(Type(typ), b)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("second decode = %#v, %v; want %#v", m2, err, m)
		}
	})
}

// FuzzReadFrame: reading arbitrary streams never panics and never buffers
// more than MaxFrame; each frame read re-encodes to the bytes it came from.
func FuzzReadFrame(f *testing.F) {
	var stream []byte
	for i, m := range sampleMessages(f) {
		b := mustFrame(f, uint64(i+1), m)
		f.Add(b)
		stream = append(stream, b...)
	}
	f.Add(stream)
	f.Add(rawFrame(2, TypeError, 1, mustAppend(f, NewError(CodeDraining, "bye"))))
	f.Add(rawFrame(0, TypeHeartbeat, 1, []byte("x")))
	f.Add(AppendHeader(nil, Header{Version: 1, Type: TypeRegister, Length: 1<<32 - 1}))
	f.Add([]byte("TLNC"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder(bytes.NewReader(data))
		off := 0
		for range 64 {
			fr, err := dec.ReadFrame()
			if cap(dec.buf) > MaxFrame {
				t.Fatalf("decoder buffer grew to %d bytes, over MaxFrame %d", cap(dec.buf), MaxFrame)
			}
			if err != nil {
				switch {
				case err == io.EOF, err == io.ErrUnexpectedEOF, errors.Is(err, ErrBadMagic),
					errors.Is(err, ErrUnsupportedVersion), errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrBadHeader):
				default:
					t.Fatalf("unclassified ReadFrame error %T: %v", err, err)
				}
				return
			}
			n := HeaderSize + len(fr.Payload)
			raw := data[off : off+n]
			off += n
			if len(fr.Payload) > MaxPayload || int(fr.Length) != len(fr.Payload) {
				t.Fatalf("frame payload %d bytes, header says %d", len(fr.Payload), fr.Length)
			}
			if !SupportedVersion(fr.Version) && fr.Type != TypeError {
				t.Fatalf("returned a %s frame of unsupported version %d", fr.Type, fr.Version)
			}
			m, err := fr.Message()
			if err != nil {
				continue
			}
			out, err := AppendFrame(nil, fr.RequestID, m)
			if err != nil {
				t.Fatalf("decoded %s does not re-frame: %v", m.Type(), err)
			}
			want := bytes.Clone(raw)
			want[4], want[5] = byte(Version>>8), byte(Version) // foreign Error frames are re-framed at Version
			if !bytes.Equal(out, want) {
				t.Fatalf("re-framed bytes differ:\n in %x\nout %x", want, out)
			}
		}
	})
}
