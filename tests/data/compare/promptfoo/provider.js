// A local, deterministic provider: it answers arithmetic questions. Asked for "only the
// number", it answers with the number; otherwise it chats, and promptfoo's `equals` fails it.
// It slips (off by one) on the questions whose sum of char codes is divisible by 5.
class MockProvider {
  id() {
    return 'mock-arithmetic';
  }

  async callApi(prompt) {
    const match = /What is (\d+) ([+*-]) (\d+)\?/.exec(prompt);
    if (!match) {
      return { output: 'I do not know.' };
    }
    const [a, op, b] = [Number(match[1]), match[2], Number(match[3])];
    let value = op === '+' ? a + b : op === '-' ? a - b : a * b;
    const codes = [...match[0]].reduce((sum, c) => sum + c.charCodeAt(0), 0);
    if (codes % 5 === 0) value += 1;
    const terse = prompt.includes('only the number');
    return { output: terse ? String(value) : `Sure! The answer is ${value}.` };
  }
}

module.exports = MockProvider;
