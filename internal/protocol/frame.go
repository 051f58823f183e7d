package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Frame layout constants. HeaderSize, Magic, the header field offsets and
// TypeError are frozen: they are the same at every protocol version.
const (
	// Magic opens every frame: "TLNC", Talon control.
	Magic = "TLNC"
	// HeaderSize is the fixed frame header length in bytes.
	HeaderSize = 24
	// MaxPayload is the largest payload a frame may declare. A record is at
	// most 16 KiB, so this leaves room without letting a peer make a
	// reader buffer more than 64 KiB per connection.
	MaxPayload = 64 * 1024
	// MaxFrame is the largest frame: header plus MaxPayload.
	MaxFrame = HeaderSize + MaxPayload
)

// Protocol versions. Version is the version this build writes; it reads
// every version from MinVersion to MaxVersion, plus Error frames of any
// version (their layout is frozen).
const (
	Version    uint16 = 1
	MinVersion uint16 = 1
	MaxVersion uint16 = 1
)

// SupportedVersion reports whether this build reads frames of version v.
func SupportedVersion(v uint16) bool { return v >= MinVersion && v <= MaxVersion }

// Frame-level errors. After any of them the stream is no longer framed
// and the connection must be closed; see Reject for what a server sends
// first.
var (
	// ErrBadMagic: the frame does not start with Magic; the peer does not
	// speak this protocol.
	ErrBadMagic = errors.New("bad frame magic")
	// ErrUnsupportedVersion is matched by *VersionError.
	ErrUnsupportedVersion = errors.New("unsupported protocol schema version")
	// ErrFrameTooLarge is matched by *FrameTooLargeError.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrBadHeader: a header field holds a value no version allows (a
	// reserved flag is set).
	ErrBadHeader = errors.New("malformed frame header")
)

// VersionError reports a frame of a protocol schema version this build
// does not read. It is returned before any payload byte is read.
type VersionError struct {
	Version uint16 // the version in the frame header
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("protocol schema version %d is not supported (this build speaks %s)", e.Version, supportedRange())
}

// Unwrap lets errors.Is(err, ErrUnsupportedVersion) match.
func (e *VersionError) Unwrap() error { return ErrUnsupportedVersion }

func supportedRange() string {
	if MinVersion == MaxVersion {
		return fmt.Sprintf("version %d", MinVersion)
	}
	return fmt.Sprintf("versions %d to %d", MinVersion, MaxVersion)
}

// FrameTooLargeError reports a frame whose declared payload length is over
// the limit. The payload is never read.
type FrameTooLargeError struct {
	Type   Type
	Length uint32 // declared payload length
	Limit  uint32
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("protocol: %s frame payload of %d bytes exceeds the %d byte limit", e.Type, e.Length, e.Limit)
}

// Unwrap lets errors.Is(err, ErrFrameTooLarge) match.
func (e *FrameTooLargeError) Unwrap() error { return ErrFrameTooLarge }

// Header is a decoded frame header. The flags word on the wire is
// reserved: written as zero, and a frame with any flag set is rejected.
type Header struct {
	Version uint16
	Type    Type
	// RequestID matches a response to its request. Requests carry a
	// non-zero ID chosen by the client; responses echo it; frames the
	// server sends unprompted (EpochBump pushes, connection-level Errors)
	// carry zero.
	RequestID uint64
	Length    uint32 // payload length in bytes
}

// AppendHeader appends the encoded header h to b.
func AppendHeader(b []byte, h Header) []byte {
	b = append(b, Magic...)
	b = appendU16(b, h.Version)
	b = appendU16(b, uint16(h.Type))
	b = appendU32(b, 0) // flags
	b = appendU32(b, h.Length)
	return appendU64(b, h.RequestID)
}

// ParseHeader decodes the first HeaderSize bytes of b. It checks, in
// order: the magic (ErrBadMagic), the version (*VersionError, unless the
// frame is an Error frame, which is readable at every version), the
// reserved flags (ErrBadHeader) and the declared length (*FrameTooLargeError).
// With *VersionError and *FrameTooLargeError the returned Header is
// complete, so a server can answer under the frame's request ID.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("protocol: header of %d bytes, want %d: %w", len(b), HeaderSize, io.ErrUnexpectedEOF)
	}
	if string(b[0:4]) != Magic {
		return Header{}, fmt.Errorf("protocol: %w: got %q, want %q", ErrBadMagic, b[0:4], Magic)
	}
	h := Header{
		Version:   binary.BigEndian.Uint16(b[4:]),
		Type:      Type(binary.BigEndian.Uint16(b[6:])),
		Length:    binary.BigEndian.Uint32(b[12:]),
		RequestID: binary.BigEndian.Uint64(b[16:]),
	}
	foreignError := false
	if !SupportedVersion(h.Version) {
		if h.Type != TypeError {
			return h, &VersionError{Version: h.Version}
		}
		foreignError = true
	}
	if flags := binary.BigEndian.Uint32(b[8:]); flags != 0 {
		return h, fmt.Errorf("protocol: %w: flags 0x%08x set; no flags are defined, the word must be zero", ErrBadHeader, flags)
	}
	limit := uint32(MaxPayload)
	if foreignError {
		// A foreign version's Error frame has the frozen layout, so it
		// can be no longer than that layout allows.
		limit = maxErrorPayload
	}
	if h.Length > limit {
		return h, &FrameTooLargeError{Type: h.Type, Length: h.Length, Limit: limit}
	}
	return h, nil
}

// Frame is one decoded frame. Payload aliases the Decoder's buffer and is
// valid until the next call to ReadFrame.
type Frame struct {
	Header
	Payload []byte
}

// Message decodes the frame's payload into a new message of its type. A
// frame of an unsupported version other than an Error frame is refused
// with *VersionError without looking at the payload.
func (f Frame) Message() (Message, error) {
	if !SupportedVersion(f.Version) && f.Type != TypeError {
		return nil, &VersionError{Version: f.Version}
	}
	return Decode(f.Type, f.Payload)
}

// AppendFrame appends the frame carrying m under requestID, at Version, to
// b. It returns *FrameTooLargeError (leaving b as it was) when the payload
// would exceed MaxPayload, and a *FieldError when m breaks a field rule.
func AppendFrame(b []byte, requestID uint64, m Message) ([]byte, error) {
	start := len(b)
	b = AppendHeader(b, Header{Version: Version, Type: m.Type(), RequestID: requestID})
	b, err := m.AppendBinary(b)
	if err != nil {
		return b[:start], err
	}
	n := len(b) - start - HeaderSize
	if n > MaxPayload {
		return b[:start], &FrameTooLargeError{Type: m.Type(), Length: uint32(n), Limit: MaxPayload}
	}
	binary.BigEndian.PutUint32(b[start+12:], uint32(n))
	return b, nil
}

// Encoder writes frames to a stream, one Write call per frame, reusing
// one buffer so that encoding does not allocate once it has grown. An
// Encoder is not safe for concurrent use: a connection that writes from
// several goroutines serialises them itself.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes m as one frame under requestID. Nothing is written when m
// cannot be encoded. A write error leaves the stream in an unknown state:
// the connection must be closed.
func (e *Encoder) Encode(requestID uint64, m Message) error {
	b, err := AppendFrame(e.buf[:0], requestID, m)
	if cap(b) <= MaxFrame {
		e.buf = b[:0]
	}
	if err != nil {
		return err
	}
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("protocol: write %s frame: %w", m.Type(), err)
	}
	return nil
}

// Decoder reads frames from a stream. It reuses one buffer, grown as
// needed up to MaxFrame, so reading does not allocate once warm.
//
// Errors: io.EOF when the stream ends cleanly between frames;
// io.ErrUnexpectedEOF when it ends inside one; ErrBadMagic,
// *VersionError, *FrameTooLargeError or ErrBadHeader for a bad header, in
// which case the payload is not read. These errors are terminal: every
// later ReadFrame returns the same error. A read error that is a deadline
// expiry (os.ErrDeadlineExceeded, as returned by net.Conn after
// SetReadDeadline) is not terminal: the bytes read so far are kept and the
// next ReadFrame resumes the frame, so a caller may poll with deadlines.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	r   io.Reader
	buf []byte // header then payload of the frame being read
	n   int    // bytes of the current frame read so far
	h   Header // valid once n >= HeaderSize
	err error  // terminal error, returned by every later call
}

// NewDecoder returns a Decoder reading from r. For a net.Conn, wrapping
// it in a bufio.Reader saves a system call per frame; the Decoder itself
// reads only the bytes of the frame it is decoding.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: r, buf: make([]byte, HeaderSize, 512)}
}

// ReadFrame reads the next frame. A frame of an unsupported version is
// refused once its header is read (the payload is not read) unless it is
// an Error frame, which is returned whatever its version.
func (d *Decoder) ReadFrame() (Frame, error) {
	if d.err != nil {
		return Frame{}, d.err
	}
	if d.n < HeaderSize {
		if err := d.fill(HeaderSize); err != nil {
			return Frame{}, err
		}
		h, err := ParseHeader(d.buf[:HeaderSize])
		if err != nil {
			d.err = err
			return Frame{Header: h}, err
		}
		d.h = h
		total := HeaderSize + int(h.Length)
		if cap(d.buf) < total {
			// Grow geometrically, never past MaxFrame (total is at most
			// MaxFrame: ParseHeader checked the length).
			nb := make([]byte, total, min(max(total, 2*cap(d.buf)), MaxFrame))
			copy(nb, d.buf[:HeaderSize])
			d.buf = nb
		}
		d.buf = d.buf[:total]
	}
	if err := d.fill(len(d.buf)); err != nil {
		return Frame{}, err
	}
	d.n = 0
	return Frame{Header: d.h, Payload: d.buf[HeaderSize:]}, nil
}

// fill reads until d.n == want (d.buf has at least want bytes).
func (d *Decoder) fill(want int) error {
	for d.n < want {
		n, err := d.r.Read(d.buf[d.n:want])
		d.n += n
		if d.n == want {
			return nil
		}
		if err == nil {
			if n == 0 {
				// A reader returning (0, nil) repeatedly would spin.
				d.err = fmt.Errorf("protocol: read returned no data: %w", io.ErrNoProgress)
				return d.err
			}
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if err == io.EOF {
			if d.n == 0 {
				d.err = io.EOF
				return io.EOF
			}
			err = io.ErrUnexpectedEOF
		}
		d.err = err
		return err
	}
	return nil
}

// Reset discards any partial frame and terminal error and makes d read
// from r, keeping its buffer.
func (d *Decoder) Reset(r io.Reader) {
	d.r, d.n, d.h, d.err = r, 0, Header{}, nil
	d.buf = d.buf[:HeaderSize]
}
