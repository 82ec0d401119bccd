package class

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/stem-edu/stem/internal/errcode"
)

// Reach says whether a student's gate answered, and if not, why.
type Reach string

const (
	ReachOK             Reach = "ok"
	ReachHostKeyUnknown Reach = "host-key-unknown" // not in the teacher's known_hosts
	ReachHostKeyChanged Reach = "host-key-changed"
	ReachRefused        Reach = "refused"     // nothing listens on the port
	ReachUnresolved     Reach = "unresolved"  // no such host name
	ReachUnreachable    Reach = "unreachable" // no route, connect timed out, closed during the handshake
	ReachTimeout        Reach = "timeout"     // no answer within the per-student timeout
	ReachKeyRefused     Reach = "key-refused" // sshd did not accept the automation key
	ReachRevoked        Reach = "revoked"     // the gate has no such grant any more
	ReachExpired        Reach = "expired"
	ReachGateRefused    Reach = "gate-refused" // the gate refused for another reason (from=, ...)
	ReachBroken         Reach = "broken"       // the answer is not the gate's status, or too large
	ReachSetup          Reach = "setup"        // the teacher's side: the key, ssh's configuration
)

// failure is why a probe did not give a status: a Reach, one line of
// what happened, and what to do about it.
type failure struct {
	reach    Reach
	why, fix string
}

var gateLineRE = regexp.MustCompile(`(?m)^stem-mcp gate: (.*)$`)

// classify reads how ssh ended: its exit code and (bounded) stderr. ssh
// itself exits 255; the gate exits 1 for a refusal and 2 for a broken
// forced command, with one "stem-mcp gate: ..." line.
func classify(s Student, exit int, stderr string) failure {
	low := strings.ToLower(stderr)
	last := lastLine(stderr)
	port := s.Port
	if port == 0 {
		port = 22
	}
	_, host, _ := strings.Cut(s.Host, "@")
	if m := gateLineRE.FindStringSubmatch(stderr); m != nil && exit != 255 {
		code, msg, ok := errcode.Cut(m[1])
		if !ok {
			code = legacyCode(msg)
		}
		switch {
		case code == errcode.Revoked:
			return failure{ReachRevoked, msg, "the student revoked the grant of this key: ask them for a new one (stemctl access grant on their side)"}
		case code == errcode.Expired:
			return failure{ReachExpired, msg, "the grant expired: ask the student to grant the key again"}
		case exit == 1:
			return failure{ReachGateRefused, msg, refusalFix(code)}
		default:
			return failure{ReachBroken, msg, "the student's forced command is broken: ask them to run `stemctl access check`"}
		}
	}
	switch {
	case strings.Contains(low, "remote host identification has changed"):
		return failure{ReachHostKeyChanged, "the student's machine shows another host key than your known_hosts has",
			fmt.Sprintf("if the machine was reinstalled, check the new fingerprint with the student, then: ssh-keygen -R '[%s]:%d' (or ssh-keygen -R %s for port 22) and add it again", host, port, host)}
	case strings.Contains(low, "host key verification failed") || strings.Contains(low, "host key is known for"):
		return failure{ReachHostKeyUnknown, "the student's host key is not in your known_hosts",
			fmt.Sprintf("check the key's fingerprint with the student (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on their machine), then add it: ssh-keyscan -p %d %s >> ~/.ssh/known_hosts (or the file ssh_options' UserKnownHostsFile names)", port, host)}
	case strings.Contains(low, "could not resolve hostname") || strings.Contains(low, "name or service not known"):
		return failure{ReachUnresolved, last, fmt.Sprintf("check the host name %s in the roster", host)}
	case strings.Contains(low, "connection refused"):
		return failure{ReachRefused, fmt.Sprintf("nothing accepts connections on %s port %d", host, port),
			"is the student's machine up and its sshd running? is the port right?"}
	case strings.Contains(low, "permission denied"):
		return failure{ReachKeyRefused, "the student's sshd does not accept the automation key",
			"the key is not granted (or the grant was revoked): the student runs `stemctl access grant` with your key's .pub, or check the roster's key"}
	case strings.Contains(low, "no route to host") || strings.Contains(low, "network is unreachable") ||
		strings.Contains(low, "timed out") || strings.Contains(low, "connection closed") ||
		strings.Contains(low, "connection reset") || strings.Contains(low, "kex_exchange_identification"):
		return failure{ReachUnreachable, last, "the machine or its network does not answer: is it on?"}
	case exit == 255:
		return failure{ReachUnreachable, last, "ssh could not connect; try: ssh -p PORT USER@HOST yourself"}
	}
	if last == "" {
		last = fmt.Sprintf("ssh exited with status %d and said nothing", exit)
	}
	return failure{ReachBroken, last, "the account's forced command is not stem-mcp gate? the student runs `stemctl access check`"}
}

// refusalFix is what to do about a gate refusal other than a revoked or
// expired grant, by its code.
func refusalFix(code errcode.Code) string {
	switch code {
	case errcode.NotAudited:
		return "the student's audit log cannot be written, so their gate refuses everything: ask them to run `stemctl audit verify`"
	case errcode.BadSetup:
		return "the student's grants cannot be read: ask them to run `stemctl access check`"
	case errcode.GrantChanged:
		return "the student changed the grant during the session: connect again"
	}
	return "the student's grant does not allow this: ask them to run `stemctl access list`"
}

// legacyCode reads the code of a gate line without one. Each student
// installs stem on their own machine, so a teacher's stemctl may poll a
// gate older than error codes, whose refusals are known only by their
// words; "" when they say nothing this knows.
func legacyCode(msg string) errcode.Code {
	if !strings.HasPrefix(msg, "refused: grant ") {
		return ""
	}
	switch {
	case strings.Contains(msg, " does not exist (revoked?)"), strings.HasSuffix(msg, " was revoked; session ended"):
		return errcode.Revoked
	case strings.Contains(msg, " expired at "), strings.HasSuffix(msg, " expired; session ended"):
		return errcode.Expired
	}
	return ""
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// ExplainHostKey says, when ssh to target (USER@HOST, port 0 for 22)
// ended on the student's host key, why and what to do, for any command
// that talks to a student's gate; "" otherwise.
func ExplainHostKey(target string, port, exit int, stderr string) string {
	f := classify(Student{Host: target, Port: port}, exit, stderr)
	if f.reach != ReachHostKeyUnknown && f.reach != ReachHostKeyChanged {
		return ""
	}
	return f.why + ": " + f.fix
}
