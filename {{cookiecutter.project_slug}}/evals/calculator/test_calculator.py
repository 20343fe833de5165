import unittest

from calculator import add, mean


class CalculatorTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)

    def test_mean(self) -> None:
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)
        self.assertEqual(mean([7]), 7)


if __name__ == "__main__":
    unittest.main()
