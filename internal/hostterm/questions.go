package hostterm

import "context"

// Choice is an answer the host line can give.
type Choice string

const (
	Yes   Choice = "yes"
	No    Choice = "no"
	While Choice = "while" // allow it all for a while: asked once more
)

// Question is one open question the host line shows.
type Question struct {
	ID      string
	From    string // who asks: "agent codex"
	Text    string // one line
	Choices []Choice
}

func (q Question) offers(c Choice) bool {
	for _, o := range q.Choices {
		if o == c {
			return true
		}
	}
	return false
}

// Questions is where the host line gets its questions and sends its
// answers: the instance's decision spool, or a fake in tests.
type Questions interface {
	// Watch sends the pending questions, oldest first, now and each time
	// they change, until ctx ends.
	Watch(ctx context.Context) <-chan []Question
	// Answer records the student's answer to the question id.
	Answer(id string, c Choice) error
}
