package client

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/talonhq/talon/internal/datav1"
)

// blockResult is one block a parallel read's task read: its bytes (as
// they are to be written), the answer, and the task's counters.
type blockResult struct {
	out *bytes.Buffer
	res *datav1.Result
	st  ReadResult
	err error
}

// readParallel reads the blocks of st's object from block from on,
// Parallel at a time, each from its owners (readBlocks, one block per
// request), and writes them to w in order, each as soon as the blocks
// before it are written. It returns the bytes written. On error w holds
// a prefix of the object and no task is left running.
func (r *ObjectReader) readParallel(ctx context.Context, st *readState, from int64, w io.Writer) (int64, error) {
	blocks := (st.size + r.BlockSize - 1) / r.BlockSize
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pending []chan blockResult
	defer func() {
		cancel()
		for _, ch := range pending { // wait for the tasks: none outlives the read
			<-ch
		}
	}()
	next := from
	var written int64
	for block := from; block < blocks; block++ {
		for ; next < blocks && next < block+int64(r.Parallel); next++ {
			pending = append(pending, r.startBlock(ctx, st, next))
		}
		res := <-pending[0]
		pending = pending[1:]
		if res.err != nil {
			return written, res.err
		}
		if res.res.ObjectSize != st.size {
			return written, fmt.Errorf("%w: object %s changed size during the read (%d, then %d bytes)", ErrObjectChanged, st.object, st.size, res.res.ObjectSize)
		}
		n, err := w.Write(res.out.Bytes())
		written += int64(n)
		r.putBuffer(res.out)
		if err != nil {
			return written, err
		}
		st.res.Blocks++
		st.res.Verified += res.st.Verified
		st.res.FromSource += res.st.FromSource
		st.res.CheckedAgainstSource += res.st.CheckedAgainstSource
		st.res.noteSilent(res.st.Silent)
	}
	return written, nil
}

// startBlock reads block in a task of its own and returns the channel its
// result arrives on.
func (r *ObjectReader) startBlock(ctx context.Context, st *readState, block int64) chan blockResult {
	ch := make(chan blockResult, 1)
	task := *st // the object's size and version are known: tasks only read them
	task.res, task.single = ReadResult{}, true
	go func() {
		buf, out := r.getBuffer(), r.getBuffer()
		defer r.putBuffer(buf)
		res, _, err := r.readBlocks(ctx, &task, block, buf, out)
		if res != nil {
			res.Data = nil // it points into buf, which goes back to the pool
		}
		ch <- blockResult{out: out, res: res, st: task.res, err: err}
	}()
	return ch
}

func (r *ObjectReader) getBuffer() *bytes.Buffer {
	if b, ok := r.bufs.Get().(*bytes.Buffer); ok {
		return b
	}
	return new(bytes.Buffer)
}

func (r *ObjectReader) putBuffer(b *bytes.Buffer) {
	b.Reset()
	r.bufs.Put(b)
}
