package proxy

import (
	"context"
	"io"
	"net"
	"sync"
)

// A request body goes upstream by the transport's copy loop, 32 KiB at a time, through
// requestTap.Read. On a plain TCP connection to the upstream that loop ends in the connection's
// io.ReaderFrom, which upstreamConn replaces with the same copy in sendChunk pieces: a large body
// then takes an eighth of the system calls on each side of the proxy. Over TLS (the real
// upstream) the transport writes through the TLS connection, which has no ReaderFrom, and this
// is never used.

// sendChunk is the size of the pieces upstreamConn sends a large body in.
const sendChunk = 256 << 10

// sendBuffers holds sendChunk buffers for upstreamConn.ReadFrom.
var sendBuffers = sync.Pool{New: func() any { b := make([]byte, sendChunk); return &b }}

// upstreamConn is a connection to the upstream, as the default transport dials it.
type upstreamConn struct{ net.Conn }

// dialUpstream wraps dial so that its connections are upstreamConns.
func dialUpstream(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &upstreamConn{Conn: c}, nil
	}
}

// ReadFrom writes what r reads to the upstream. A body the transport's loop would send in more
// than one piece (it passes a body as an io.LimitedReader of its Content-Length) goes in sendChunk
// pieces; anything else goes as the connection would send it.
func (c *upstreamConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok && lr.N > 32<<10 {
		buf := sendBuffers.Get().(*[]byte)
		defer sendBuffers.Put(buf)
		return io.CopyBuffer(writerOnly{c.Conn}, r, *buf)
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }
