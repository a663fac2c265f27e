"""The judge the pairwise gate tests give toy_calc (tests/e2e/test_gate_pairwise.py,
test_attacks_pairwise.py): it prefers the right answer, and leans to the first output shown
when it cannot tell them apart."""

JUDGE = """


class Compared(ToyCalcAdapter):
    def prefer(self, task, output_a, output_b, *, seed):
        right_a, right_b = output_a == task.target, output_b == task.target
        if right_a != right_b:
            return "A" if right_a else "B"
        return "A"  # a judge that cannot tell them apart leans to the first output shown
"""
