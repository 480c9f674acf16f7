package proxy

import (
	"context"
	"io"
	"net"
)

// A request body goes upstream by the transport's copy loop, 32 KiB at a time, through
// requestTap.Read. On a plain TCP connection to the upstream that loop ends in the connection's
// io.ReaderFrom, which upstreamConn replaces with the same copy in sendChunk pieces: a large body
// then takes an eighth of the system calls on each side of the proxy. Over TLS (the real
// upstream) the transport writes through the TLS connection, which has no ReaderFrom, and this
// is never used.

// sendChunk is the size of the pieces upstreamConn sends a large body in.
const sendChunk = 256 << 10

// sendBuffers holds the few buffers upstreamConn sends large bodies through, each made on first
// use (a nil in the channel is one not made yet). There are few so that a burst of uploads
// cannot hold one each: an upload that finds none left goes as the connection would send it.
var sendBuffers = func() chan []byte {
	c := make(chan []byte, 4)
	for range cap(c) {
		c <- nil
	}
	return c
}()

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
// pieces while a send buffer is free; anything else goes as the connection would send it.
func (c *upstreamConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok && lr.N > 32<<10 {
		select {
		case buf := <-sendBuffers:
			if buf == nil {
				buf = make([]byte, sendChunk)
			}
			defer func() { sendBuffers <- buf }()
			return io.CopyBuffer(writerOnly{c.Conn}, r, buf)
		default:
		}
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }
