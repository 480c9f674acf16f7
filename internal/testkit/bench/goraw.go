package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// GoRaw is the bench's variant go-raw: an HTTP/1.1 forwarder with one goroutine per client
// connection, which reads a request (http.ReadRequest), writes it to a pooled upstream
// connection, reads the answer's head (http.ReadResponse) and copies its body back, one write
// per read, all on that goroutine. No http.Server, ReverseProxy or http.Transport is on its path,
// so none of their goroutine hand-offs: it shows how much of nginx's lead over the bare proxy a
// Go program can have at all. A measuring instrument for plain-HTTP
// upstreams that keep connections open, not a proxy for users: no timeouts, no retries, no
// header rules beyond dropping hop-by-hop ones. Build it with NewGoRaw.
type GoRaw struct {
	host string
	idle chan *rawConn // idle upstream connections, at most 16 as the other proxies keep

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // every open connection, both sides, closed by Close
	closed bool
}

// rawConn is an upstream connection with its buffers.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// rawBuffer is the size of each connection's buffers and of the body copy.
const rawBuffer = 32 << 10

// NewGoRaw returns a forwarder to upstream, an http:// URL (its path is not used).
func NewGoRaw(upstream string) (*GoRaw, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing upstream: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("go-raw: upstream %q: want http://host:port", upstream)
	}
	return &GoRaw{host: u.Host, idle: make(chan *rawConn, 16), conns: map[net.Conn]struct{}{}}, nil
}

// Serve forwards the connections ln accepts until ln is closed or Close is called.
func (g *GoRaw) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			g.mu.Lock()
			closed := g.closed
			g.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if !g.track(c) {
			return nil
		}
		go g.serve(c)
	}
}

// Close closes every connection, which ends every goroutine Serve started.
func (g *GoRaw) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for c := range g.conns {
		_ = c.Close()
	}
}

// track adds c to the open connections, or closes it and reports false after Close.
func (g *GoRaw) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		_ = c.Close()
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *GoRaw) drop(c net.Conn) {
	_ = c.Close()
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// serve forwards the requests of client connection c one after the other.
func (g *GoRaw) serve(c net.Conn) {
	defer g.drop(c)
	br := bufio.NewReaderSize(c, rawBuffer)
	// 10 bytes in front of each read for its chunk header, 2 behind for its CRLF.
	buf := make([]byte, 10+rawBuffer+2)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		// The client's Connection: close is for this connection; the upstream one stays open.
		last := req.Close
		req.Close = false
		if err := g.forward(c, req, buf); err != nil || last {
			return
		}
	}
}

// upstream returns an idle upstream connection or a new one.
func (g *GoRaw) upstream() (*rawConn, error) {
	select {
	case up := <-g.idle:
		return up, nil
	default:
	}
	c, err := net.Dial("tcp", g.host)
	if err != nil {
		return nil, err
	}
	if !g.track(c) {
		return nil, net.ErrClosed
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, rawBuffer), bw: bufio.NewWriterSize(c, rawBuffer)}, nil
}

// release keeps up for the next request, or closes it when enough are idle.
func (g *GoRaw) release(up *rawConn) {
	select {
	case g.idle <- up:
	default:
		g.drop(up.c)
	}
}

// hopByHop are the headers that belong to one connection (RFC 9110, 7.6.1); Transfer-Encoding
// and Content-Length are set for the client's side anew.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends req upstream and its answer to c. An error means c can carry no more requests.
func (g *GoRaw) forward(c net.Conn, req *http.Request, buf []byte) error {
	up, err := g.upstream()
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return err
	}
	req.URL.Scheme, req.URL.Host, req.Host = "http", g.host, g.host
	for _, h := range hopByHop {
		if h != "Transfer-Encoding" { // req.TransferEncoding, not a header, says how Write sends it
			req.Header.Del(h)
		}
	}
	if err := req.Write(up.bw); err != nil {
		g.drop(up.c)
		return err
	}
	if err := up.bw.Flush(); err != nil {
		g.drop(up.c)
		return err
	}
	resp, err := http.ReadResponse(up.br, req)
	if err != nil {
		g.drop(up.c)
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return err
	}
	if err := g.answer(c, resp, buf); err != nil {
		g.drop(up.c)
		return err
	}
	if resp.Close {
		g.drop(up.c)
	} else {
		g.release(up)
	}
	return nil
}

// answer writes resp to c: its head in one write, then each read of its body in one write,
// chunked when the upstream gave no length.
func (g *GoRaw) answer(c net.Conn, resp *http.Response, buf []byte) error {
	defer resp.Body.Close()
	for _, h := range hopByHop {
		resp.Header.Del(h)
	}
	chunked := resp.ContentLength < 0
	head := append(buf[:0], "HTTP/1.1 "...)
	head = append(head, resp.Status...)
	head = append(head, "\r\n"...)
	if chunked {
		resp.Header.Set("Transfer-Encoding", "chunked")
	} else {
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w := appendWriter{b: head}
	if err := resp.Header.Write(&w); err != nil {
		return err
	}
	head = append(w.b, "\r\n"...)
	if _, err := c.Write(head); err != nil {
		return err
	}
	for {
		n, rerr := resp.Body.Read(buf[10 : 10+rawBuffer])
		if n > 0 {
			out := buf[10 : 10+n]
			if chunked {
				var size [10]byte
				h := append(strconv.AppendInt(size[:0], int64(n), 16), "\r\n"...)
				start := 10 - len(h)
				copy(buf[start:], h)
				out = append(buf[start:10+n], "\r\n"...)
			}
			if _, err := c.Write(out); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if chunked {
		if _, err := io.WriteString(c, "0\r\n\r\n"); err != nil {
			return err
		}
	}
	return nil
}

// appendWriter appends what is written to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// ServeGoRaw runs go-raw on listen until ctx ends: the bareproxy command with -go-raw.
func ServeGoRaw(ctx context.Context, listen, upstream string) error {
	g, err := NewGoRaw(upstream)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		_ = ln.Close()
		g.Close()
	})
	defer stop()
	if err := g.Serve(ln); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}
