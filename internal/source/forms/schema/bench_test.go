package schema

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// wideForm repeats the fixture's questions (every documented type) copies
// times under fresh ids, and returns submissions that answer all of them
// with the fixture's realistic values.
func wideForm(tb testing.TB, copies, n int) (*forms.Form, []forms.Submission) {
	fx := loadFixture(tb)
	full := fx.Submissions[0]
	f := fx.Form
	f.Questions = nil
	var answers []forms.Answer
	for c := range copies {
		for _, q := range fx.Form.Questions {
			f.Questions = append(f.Questions, forms.Field{ID: fmt.Sprintf("%s_%d", q.ID, c), Name: fmt.Sprintf("%s %d", q.Name, c), Type: q.Type})
		}
		for _, a := range full.Questions {
			a.ID = fmt.Sprintf("%s_%d", a.ID, c)
			answers = append(answers, a)
		}
	}
	subs := make([]forms.Submission, n)
	for i := range subs {
		s := full
		s.SubmissionID = fmt.Sprintf("sub-%06d", i)
		s.SubmissionTime = full.SubmissionTime.Add(time.Duration(i) * time.Second)
		s.Questions = answers
		subs[i] = s
	}
	return &f, subs
}

// BenchmarkBuilder appends 10k submissions of a form with 78 questions (two
// of every documented type) plus calculations, a URL parameter, scheduling
// and payment fields.
func BenchmarkBuilder(b *testing.B) {
	const n = 10_000
	f, subs := wideForm(b, 2, n)
	tab, _, err := New(f, Options{IncludeEditLink: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bld := NewBuilder(tab, memory.DefaultAllocator)
		for i := range subs {
			if err := bld.Append(&subs[i], testLin); err != nil {
				b.Fatal(err)
			}
		}
		rec, _, st := bld.Finish()
		if st.Rows != n || len(st.Misfits) != 0 {
			b.Fatalf("rows %d, misfits %v", st.Rows, st.Misfits)
		}
		rec.Release()
		bld.Release()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "subs/s")
}

// BenchmarkBuilderChunks appends 10k submissions of the wide form as the
// poller does, finishing a chunk every 2,048 rows with the same builder.
func BenchmarkBuilderChunks(b *testing.B) {
	const n, chunk = 10_000, 2048
	f, subs := wideForm(b, 2, n)
	tab, _, err := New(f, Options{IncludeEditLink: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bld := NewBuilder(tab, memory.DefaultAllocator)
		for i := range subs {
			if err := bld.Append(&subs[i], testLin); err != nil {
				b.Fatal(err)
			}
			if bld.Len() == chunk || i == n-1 {
				rec, _, _ := bld.Finish()
				rec.Release()
			}
		}
		bld.Release()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "subs/s")
}
