package proxy

import (
	"errors"
	"net"
	"sync"
	"time"
)

// AcceptOnFirstByte returns a listener that hands each connection ln accepts to its caller (an
// http.Server) only once the client has sent its first byte, and closes connections that send
// nothing for idle.
//
// Go's HTTP/1 server times a connection's first request from the moment it accepts it: with a
// ReadHeaderTimeout of 30 s, a connection the client opened and has not used yet is closed 30 s
// later, while a kept-alive connection waits for its next request for the whole IdleTimeout and
// only then times the headers. Clients do open connections ahead of use (Go's transport dials
// one for a request that another connection then serves, and keeps it), and a client that
// starts a request on one just as the server closes it loses that request: a POST on a
// connection never used before is not retried. cctrace lost requests that way in the bench, all
// on connections opened one header timeout earlier. Behind this listener a new
// connection is treated as a kept-alive one: the server's header timeout starts at the first
// byte, and a connection that sends nothing for idle is closed, as a kept-alive one is after
// its IdleTimeout.
//
// Close closes ln and every connection still waiting for its first byte.
func AcceptOnFirstByte(ln net.Listener, idle time.Duration) net.Listener {
	l := &firstByteListener{
		Listener: ln,
		idle:     idle,
		ready:    make(chan net.Conn),
		errs:     make(chan error),
		done:     make(chan struct{}),
		waiting:  make(map[net.Conn]struct{}),
	}
	go l.acceptLoop()
	return l
}

type firstByteListener struct {
	net.Listener
	idle  time.Duration
	ready chan net.Conn // connections whose first byte has arrived
	errs  chan error    // errors of ln.Accept, for Accept to return
	done  chan struct{} // closed by Close

	closeOnce sync.Once
	mu        sync.Mutex
	waiting   map[net.Conn]struct{} // connections waiting for their first byte
}

// acceptLoop accepts connections and starts a wait for each one's first byte, until ln is closed.
// Each of ln's errors goes to Accept before it accepts again.
func (l *firstByteListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case l.errs <- err:
				continue
			case <-l.done:
				return
			}
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		l.waiting[c] = struct{}{}
		l.mu.Unlock()
		go l.waitFirstByte(c)
	}
}

// waitFirstByte reads c's first byte, within idle, and hands c to Accept with that byte in front.
func (l *firstByteListener) waitFirstByte(c net.Conn) {
	var first [1]byte
	n, err := 0, c.SetReadDeadline(time.Now().Add(l.idle))
	if err == nil {
		n, err = c.Read(first[:])
	}
	if err == nil {
		// The server sets its own deadlines from here on.
		err = c.SetReadDeadline(time.Time{})
	}
	l.mu.Lock()
	delete(l.waiting, c)
	l.mu.Unlock()
	if n == 0 || err != nil {
		_ = c.Close()
		return
	}
	select {
	case l.ready <- &firstByteConn{Conn: c, first: first[0], pending: true}:
	case <-l.done:
		_ = c.Close()
	}
}

// Accept returns the next connection whose client has sent something.
func (l *firstByteListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections still waiting for their first byte.
func (l *firstByteListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.waiting {
			_ = c.Close()
		}
		l.mu.Unlock()
	})
	return err
}

// firstByteConn is a connection whose first byte was read ahead: Read returns it first. The
// HTTP server reads a connection from one goroutine at a time.
type firstByteConn struct {
	net.Conn
	first   byte
	pending bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		c.pending = false
		p[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection, as the server does before it closes one whose request
// body it did not read; net.Conn hides the TCP connection's own method. A connection without one
// is left as it is.
func (c *firstByteConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
