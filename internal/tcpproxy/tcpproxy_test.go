package tcpproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echoServer(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads len(msg) bytes back within d.
func roundTrip(c net.Conn, msg string, d time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	return readN(c, len(msg), d)
}

func readN(c net.Conn, n int, d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestPassHoldPass(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	got, err := roundTrip(c, "hello", time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello", got)

	p.SetMode(Hold)
	_, err = roundTrip(c, "held", 200*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing comes back while held")
	p.SetMode(Pass)
	got, err = readN(c, 4, time.Second)
	require.NoError(t, err)
	require.Equal(t, "held", got, "held bytes are delivered after the black hole heals")
	require.Eventually(t, func() bool { s := p.Stats(); return s.Up == 9 && s.Down == 9 },
		time.Second, 5*time.Millisecond, "stats %+v", p.Stats())
}

func TestHoldAppliesToNewConnections(t *testing.T) {
	p := start(t)
	p.SetMode(Hold)
	c := dial(t, p) // accepted, but nothing flows
	_, err := roundTrip(c, "x", 200*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	p.SetMode(Pass)
	got, err := readN(c, 1, time.Second)
	require.NoError(t, err)
	require.Equal(t, "x", got)
}

func TestRefuseResetsOpenAndNewConnections(t *testing.T) {
	p := start(t)
	open := dial(t, p)
	_, err := roundTrip(open, "a", time.Second)
	require.NoError(t, err)
	p.SetMode(Refuse)
	_, err = readN(open, 1, time.Second)
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "open connection reset, got %v", err)

	// A new connection is reset: at connect, or at its first exchange.
	if fresh, err := net.Dial("tcp", p.Addr()); err == nil {
		_, err = roundTrip(fresh, "b", time.Second)
		fresh.Close()
		require.Error(t, err, "a new connection is reset")
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded)
	} else {
		require.ErrorIs(t, err, syscall.ECONNRESET)
	}

	p.SetMode(Pass)
	c := dial(t, p)
	got, err := roundTrip(c, "c", time.Second)
	require.NoError(t, err)
	require.Equal(t, "c", got)
	require.GreaterOrEqual(t, p.Stats().Reset, int64(2))
}

func TestHoldWhenFreezesTheMatchingChunk(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	fired := p.HoldWhen(func(b []byte) bool { return bytes.Contains(b, []byte("SAVE")) })
	got, err := roundTrip(c, "read", time.Second)
	require.NoError(t, err, "chunks that do not match pass")
	require.Equal(t, "read", got)
	_, err = roundTrip(c, "SAVE", 200*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the matching chunk is held")
	select {
	case <-fired:
	default:
		t.Fatal("trigger did not report firing")
	}
	require.Equal(t, Hold, p.Mode())
	p.SetMode(Pass)
	got, err = readN(c, 4, time.Second)
	require.NoError(t, err)
	require.Equal(t, "SAVE", got)
	// One-shot: the next match passes.
	got, err = roundTrip(c, "SAVE", time.Second)
	require.NoError(t, err)
	require.Equal(t, "SAVE", got)
}
