package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// soakCounts is what the soak report holds.
type soakCounts struct {
	Calls     int64  `json:"calls"`
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error,omitempty"`
	// Paused is true once a pause asked for has taken effect: no call is
	// in flight and none starts until resumed.
	Paused bool `json:"paused"`
}

// soak calls tools through the agent's MCP session at a steady pace, the
// way a busy agent polls the student's session.
type soak struct {
	mu     sync.Mutex
	wmu    sync.Mutex // one writer of the report at a time
	cond   *sync.Cond
	hold   bool
	counts soakCounts
	path   string
}

func startSoak(c *client.Client, every time.Duration, path string) *soak {
	s := &soak{path: path}
	s.cond = sync.NewCond(&s.mu)
	s.write()
	go s.loop(c, every)
	return s
}

// pause stops (or resumes) the calls; the report says when no call is left
// in flight.
func (s *soak) pause(on bool) {
	s.mu.Lock()
	s.hold = on
	if !on {
		s.counts.Paused = false
	}
	s.mu.Unlock()
	s.cond.Broadcast()
	s.write()
}

func (s *soak) loop(c *client.Client, every time.Duration) {
	tools := []string{"session_status", "pane_list", "nvim_status"}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		<-tick.C
		s.mu.Lock()
		for s.hold {
			if !s.counts.Paused {
				s.counts.Paused = true
				s.mu.Unlock()
				s.write()
				s.mu.Lock()
				continue
			}
			s.cond.Wait()
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := call(ctx, c, tools[i%len(tools)], nil)
		cancel()
		s.mu.Lock()
		s.counts.Calls++
		if err != nil {
			s.counts.Errors++
			s.counts.LastError = err.Error()
		}
		s.mu.Unlock()
		s.write()
	}
}

func (s *soak) write() {
	if s.path == "" {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	data, _ := json.Marshal(s.counts)
	s.mu.Unlock()
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		os.Rename(tmp, s.path)
	}
}
