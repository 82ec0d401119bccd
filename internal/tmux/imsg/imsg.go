// Package imsg is the wire format of tmux's client/server protocol:
// OpenBSD imsg messages on the server's unix socket, a 16-byte header
// (type u32, length u16 counting the header, flags u16, peer id u32 whose
// low byte is the protocol version, pid u32; host byte order) and then
// the data. Descriptors travel as SCM_RIGHTS with the message that
// carries them (flag HasFD). The format and the protocol version (8) are
// the same from tmux 2.x to 3.5.
//
// Everything read is the peer's word: lengths are checked before
// anything is kept, a message is at most tmux's own maximum, and
// descriptors a peer sends are closed unread.
package imsg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

const (
	ProtocolVersion = 8
	HeaderSize      = 16
	MaxSize         = 16384
	HasFD           = 1
)

// Message types (tmux-protocol.h).
const (
	MsgVersion = 12

	MsgIdentifyFlags     = 100
	MsgIdentifyTerm      = 101
	MsgIdentifyTTYName   = 102
	MsgIdentifyStdin     = 104
	MsgIdentifyEnviron   = 105
	MsgIdentifyDone      = 106
	MsgIdentifyClientPID = 107
	MsgIdentifyCWD       = 108
	MsgIdentifyFeatures  = 109
	MsgIdentifyStdout    = 110
	MsgIdentifyLongFlags = 111

	MsgCommand    = 200
	MsgDetach     = 201
	MsgDetachKill = 202
	MsgExit       = 203
	MsgExited     = 204
	MsgExiting    = 205
	MsgLock       = 206
	MsgReady      = 207
	MsgShell      = 209
	MsgShutdown   = 210
	MsgSuspend    = 214
	MsgExec       = 217
	MsgFlags      = 218

	MsgReadOpen   = 300
	MsgReadDone   = 302
	MsgWriteOpen  = 303
	MsgWrite      = 304
	MsgWriteReady = 305
	MsgWriteClose = 306
)

// Client flags (tmux.h) this package sends.
const (
	ClientNoStartServer = 0x1000
	ClientControl       = 0x2000
	ClientUTF8          = 0x10000
)

// ErrMalformed means the peer sent something that is not an imsg stream.
var ErrMalformed = errors.New("imsg: malformed message")

// ErrTooLong means a message to send is over MaxSize.
var ErrTooLong = errors.New("imsg: message too long")

// Msg is one message read from the peer.
type Msg struct {
	Type   uint32
	PeerID uint32
	Data   []byte
}

// Encode frames one message from this client.
func Encode(typ, peerID uint32, fd bool, data []byte) ([]byte, error) {
	n := HeaderSize + len(data)
	if n > MaxSize {
		return nil, fmt.Errorf("%w: message of %d bytes over tmux's %d", ErrTooLong, n, MaxSize)
	}
	b := make([]byte, n)
	binary.NativeEndian.PutUint32(b[0:], typ)
	binary.NativeEndian.PutUint16(b[4:], uint16(n))
	if fd {
		binary.NativeEndian.PutUint16(b[6:], HasFD)
	}
	binary.NativeEndian.PutUint32(b[8:], peerID)
	binary.NativeEndian.PutUint32(b[12:], uint32(os.Getpid()))
	copy(b[HeaderSize:], data)
	return b, nil
}

// Conn reads and writes imsg messages on a connected unix socket.
// Everything read is the server's word, and the server belongs to the
// container: lengths are checked before anything is kept, a message is
// at most tmux's own maximum, and descriptors a server sends are closed
// unread.
type Conn struct {
	// PeerID goes into every message sent; its low byte is the protocol
	// version (NewConn sets ProtocolVersion).
	PeerID uint32

	conn *net.UnixConn
	buf  []byte // bytes read and not yet parsed
	rbuf []byte
	oob  []byte
}

func NewConn(c *net.UnixConn) *Conn {
	return &Conn{PeerID: ProtocolVersion, conn: c, rbuf: make([]byte, MaxSize), oob: make([]byte, unix.CmsgSpace(16*4))}
}

// Send writes one message, with fd attached when f is not nil.
func (c *Conn) Send(typ uint32, f *os.File, data []byte) error {
	b, err := Encode(typ, c.PeerID, f != nil, data)
	if err != nil {
		return err
	}
	var oob []byte
	if f != nil {
		oob = unix.UnixRights(int(f.Fd()))
	}
	n, oobn, err := c.conn.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return fmt.Errorf("imsg: sending message %d: %w", typ, err)
	}
	if n != len(b) || oobn != len(oob) {
		return fmt.Errorf("imsg: sending message %d: short write", typ)
	}
	return nil
}

// Out is one message for SendAll.
type Out struct {
	Type uint32
	Data []byte
}

// SendAll writes messages without descriptors in one write: the peer reads
// all of them, or none when the write fails (a write of a few hundred
// bytes to a unix socket is never split).
func (c *Conn) SendAll(msgs []Out) error {
	var b []byte
	for _, m := range msgs {
		f, err := Encode(m.Type, c.PeerID, false, m.Data)
		if err != nil {
			return err
		}
		b = append(b, f...)
	}
	n, err := c.conn.Write(b)
	if err != nil {
		return fmt.Errorf("imsg: sending %d messages: %w", len(msgs), err)
	}
	if n != len(b) {
		return fmt.Errorf("imsg: sending %d messages: short write", len(msgs))
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.conn.Close() }

// SetWriteDeadline bounds the writes that follow (zero: none).
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// Next returns the next message, io.EOF when the peer closed the
// connection, or an error wrapping ErrMalformed for a malformed one.
func (c *Conn) Next() (Msg, error) {
	for {
		if len(c.buf) >= HeaderSize {
			n := int(binary.NativeEndian.Uint16(c.buf[4:]))
			if n < HeaderSize || n > MaxSize {
				return Msg{}, fmt.Errorf("%w: imsg length %d", ErrMalformed, n)
			}
			if len(c.buf) >= n {
				m := Msg{
					Type:   binary.NativeEndian.Uint32(c.buf[0:]),
					PeerID: binary.NativeEndian.Uint32(c.buf[8:]),
					Data:   append([]byte(nil), c.buf[HeaderSize:n]...),
				}
				c.buf = c.buf[n:]
				if len(c.buf) == 0 {
					c.buf = nil
				}
				return m, nil
			}
		}
		n, oobn, _, _, err := c.conn.ReadMsgUnix(c.rbuf, c.oob)
		closeRights(c.oob[:oobn])
		if n > 0 {
			if len(c.buf)+n > 2*MaxSize {
				return Msg{}, fmt.Errorf("%w: unparsed imsg data over %d bytes", ErrMalformed, 2*MaxSize)
			}
			c.buf = append(c.buf, c.rbuf[:n]...)
			continue
		}
		if err == nil {
			err = io.EOF
		}
		if errors.Is(err, io.EOF) && len(c.buf) > 0 {
			return Msg{}, fmt.Errorf("%w: connection closed inside a message", ErrMalformed)
		}
		return Msg{}, err
	}
}

// closeRights closes every descriptor in a control message: a server has
// no reason to send its client any, and keeping them would let it fill
// our descriptor table.
func closeRights(oob []byte) {
	if len(oob) == 0 {
		return
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// CString is s NUL-terminated, as tmux sends strings.
func CString(s string) []byte { return append([]byte(s), 0) }

// PackArgv is a MSG_COMMAND body: argc (int32) and the NUL-terminated
// arguments.
func PackArgv(argv []string) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(len(argv)))
	for _, a := range argv {
		b = append(b, CString(a)...)
	}
	return b
}
