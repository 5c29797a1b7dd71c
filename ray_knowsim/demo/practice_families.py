"""Six families of short math problems, each a template over its numbers with its own IU graph.

Why templates: an adaptive run needs a pool of a few dozen items to decide anything (seven demo
items can never: docs/adaptive.md, "min_items"), and the project must ship them itself, offline,
without the authors' release. A family fixes the wording, the solution's steps and the IUs; its
numbers change the problem, the answer and the IUs that carry them, so every item has its own
graph. Pure text: no files, no randomness (``practice.py`` picks the numbers and writes nothing).

Every graph has eight IUs at :data:`LEVELS` (foundations first, the item's own steps last) and its
edges go from a more abstract IU to a less abstract one by at most 0.35, as the demo's do.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

#: abstraction level of IU1..IU8 in every family
LEVELS = (0.9, 0.85, 0.8, 0.7, 0.65, 0.55, 0.5, 0.45)


@dataclass(frozen=True)
class Problem:
    """One instance of a family: the item's text and its IU graph's content."""

    type: str
    level: str
    problem: str
    solution: str
    areas: tuple[str, ...]
    ius: tuple[tuple[str, str], ...]  # (concept, description) of IU1..IU8
    edges: tuple[tuple[int, int], ...]  # (prerequisite, dependent), 1-based


def rectangle(b: int, a: int, w: int) -> Problem:
    """Length ``a`` more than ``b`` times the width ``w``; the perimeter is given, the area asked."""
    length, k = b * w + a, 2 * (b + 1)
    perimeter = 2 * (length + w)
    return Problem(
        "Algebra", "Level 2",
        f"The length of a rectangle is {a} cm more than {b} times its width, and its perimeter is {perimeter} cm. "
        "What is the area of the rectangle, in square centimetres?",
        f"Let the width be $w$. The length is ${b}w+{a}$, so the perimeter is $2(({b}w+{a})+w)={k}w+{2 * a}={perimeter}$. "
        f"Then $w={w}$, the length is ${length}$ and the area is ${length}\\cdot {w}=\\boxed{{{length * w}}}$.",
        ("Translating word problems into algebra", "Perimeter and area of rectangles", "Solving linear equations"),
        (("Variables for unknown quantities", "A letter such as w can stand for a quantity we do not know yet, and we can "
          "write expressions containing it as if it were a number."),
         ("Perimeter of a rectangle", "The perimeter is the total length of the boundary: two lengths plus two widths, "
          "so P = 2(l + w). It measures the distance around the shape."),
         ("Area of a rectangle", "The area is the surface a rectangle covers, length times width, measured in square "
          "units, unlike the perimeter."),
         ("Translating comparison phrases into expressions", f"The phrase '{a} more than {b} times the width' becomes "
          f"{b}w + {a}: multiply the width first, then add."),
         ("Distributing and combining like terms", "Multiplying a factor across brackets and adding terms in the same "
          "variable, such as 2w + w = 3w, simplify an expression without changing its value."),
         ("Setting up the perimeter equation", f"Putting the length {b}w + {a} into the perimeter formula gives "
          f"2(({b}w + {a}) + w) = {perimeter}, one equation in one unknown."),
         ("Solving the linear equation", f"Simplified, {k}w + {2 * a} = {perimeter}; subtracting {2 * a} and dividing by "
          f"{k} on both sides gives the width w = {w}."),
         ("Area is the quantity asked for", f"The perimeter only finds the sides: the answer multiplies the length "
          f"{length} by the width {w}, giving {length * w} square centimetres.")),
        ((1, 4), (1, 5), (2, 6), (4, 6), (5, 7), (6, 7), (3, 8), (7, 8)),
    )  # fmt: skip


def consecutive(n: int, start: int) -> Problem:
    """``n`` consecutive integers from ``start``: their sum is given, the largest asked."""
    triangle = n * (n - 1) // 2
    total = n * start + triangle
    return Problem(
        "Algebra", "Level 2",
        f"The sum of {n} consecutive integers is {total}. What is the largest of these integers?",
        f"Call the smallest $x$; the integers are $x, x+1, \\dots, x+{n - 1}$ and their sum is ${n}x+{triangle}={total}$. "
        f"So $x={start}$ and the largest is ${start}+{n - 1}=\\boxed{{{start + n - 1}}}$.",
        ("Consecutive integers", "Linear equations"),
        (("Consecutive integers", "Consecutive integers follow each other with no gaps, each one more than the one "
          "before, like 7, 8, 9."),
         ("Variables for unknown quantities", "A letter such as x names a number we do not know yet so that we can "
          "write the conditions of the problem as an equation."),
         ("Sums of the first whole numbers", "Adding 1 + 2 + ... + m gives m(m + 1)/2, the count of terms times their "
          "average, a shortcut for adding a run of whole numbers."),
         ("Writing the integers from the smallest", f"If the smallest integer is x, the {n} integers are x, x + 1, and "
          f"so on up to x + {n - 1}."),
         ("Combining like terms", f"Adding the {n} expressions collects {n} copies of x and the constants "
          f"1 + 2 + ... + {n - 1} = {triangle} into {n}x + {triangle}."),
         ("Setting up the sum equation", f"The condition on the sum reads {n}x + {triangle} = {total}, a linear "
          "equation in the smallest integer."),
         ("Solving for the smallest integer", f"Subtracting {triangle} and dividing by {n} gives x = {start}; checking, "
          f"the {n} integers from {start} add up to {total}."),
         ("The largest is asked, not the smallest", f"The question asks for the largest integer, x + {n - 1} = "
          f"{start + n - 1}; stopping at x answers a different question.")),
        ((1, 4), (2, 4), (2, 5), (3, 6), (4, 5), (5, 6), (6, 7), (7, 8)),
    )  # fmt: skip


def markdowns(price: int, first: int, second: int) -> Problem:
    """Two successive percentage markdowns of ``price``: the final price asked."""
    mid = price * (100 - first) // 100
    final = mid * (100 - second) // 100
    total_off = Fraction(100 * (price - final), price)
    return Problem(
        "Prealgebra", "Level 2",
        f"A jacket costs ${price}. It is marked down {first}%, and then the sale price is marked down a further "
        f"{second}%. What is the final price, in dollars?",
        f"The first markdown leaves ${100 - first}\\%$ of the price: ${price}\\cdot {(100 - first) / 100:g}={mid}$. The second "
        f"leaves ${100 - second}\\%$ of that: ${mid}\\cdot {(100 - second) / 100:g}=\\boxed{{{final}}}$.",
        ("Percentages", "Successive changes"),
        (("Percent means per hundred", "A percentage is a fraction with denominator 100: 25% is 25/100, a quarter of "
          "the whole it is taken of."),
         ("Multiplying by a decimal", "Multiplying by 0.75 takes three quarters of a number; multiplying by a number "
          "below one makes the result smaller."),
         ("A markdown reduces the current price", "A markdown takes a percentage off the price as it stands at that "
          "moment, not off the original price."),
         ("A decrease as a multiplier", f"Taking {first}% off leaves {100 - first}% of the price, so the price is "
          f"multiplied by {(100 - first) / 100:g}."),
         ("Successive changes multiply", "Two changes in a row multiply their factors: each one applies to the "
          "result of the one before."),
         ("The first markdown", f"After {first}% off, the jacket costs {price} times {(100 - first) / 100:g}, which is "
          f"{mid} dollars."),
         ("The second markdown", f"The further {second}% is taken off {mid}: {mid} times {(100 - second) / 100:g} "
          f"gives the final price of {final} dollars."),
         ("Percentages do not add", f"The two markdowns together take {float(total_off):g}% off, not {first + second}%: "
          "the second percentage is of a smaller price.")),
        ((1, 4), (2, 4), (3, 4), (2, 5), (4, 5), (4, 6), (5, 7), (6, 7), (5, 8), (7, 8)),
    )  # fmt: skip


def right_triangle(a: int, b: int, c: int) -> Problem:
    """A right triangle with legs ``a``, ``b`` (hypotenuse ``c``): the perimeter asked."""
    return Problem(
        "Geometry", "Level 2",
        f"A right triangle has legs of length {a} cm and {b} cm. What is its perimeter, in centimetres?",
        f"By the Pythagorean theorem the hypotenuse is $\\sqrt{{{a}^2+{b}^2}}=\\sqrt{{{a * a + b * b}}}={c}$, so the "
        f"perimeter is ${a}+{b}+{c}=\\boxed{{{a + b + c}}}$.",
        ("Right triangles", "Square roots", "Perimeter"),
        (("Legs and hypotenuse of a right triangle", "In a right triangle the two sides that meet at the right angle "
          "are the legs; the longest side, opposite it, is the hypotenuse."),
         ("Squares and square roots", "Squaring multiplies a number by itself; the square root undoes it, so the "
          "square root of 49 is 7."),
         ("Perimeter of a polygon", "The perimeter of a triangle is the sum of its three side lengths, the distance "
          "once around its boundary."),
         ("Pythagorean theorem", "In a right triangle the squares of the legs add up to the square of the "
          "hypotenuse: a squared plus b squared equals c squared."),
         ("Recognising Pythagorean triples", "Whole-number sides such as 3, 4, 5 or 5, 12, 13 and their multiples "
          "satisfy the theorem exactly, so a perfect square is expected."),
         ("Squaring the legs", f"Here {a} squared plus {b} squared is {a * a} + {b * b} = {a * a + b * b}, the square "
          "of the hypotenuse."),
         ("Taking the square root", f"The hypotenuse is the square root of {a * a + b * b}, which is {c}: the only "
          "positive length whose square matches."),
         ("Adding the three sides", f"The perimeter adds both legs and the hypotenuse: {a} + {b} + {c} = {a + b + c} "
          "centimetres, not the legs alone.")),
        ((1, 4), (2, 4), (2, 5), (4, 6), (5, 7), (6, 7), (3, 8), (7, 8)),
    )  # fmt: skip


def arithmetic_series(first: int, step: int, n: int) -> Problem:
    """The sum of the first ``n`` terms of first + k * step."""
    last = first + (n - 1) * step
    total = n * (first + last) // 2
    return Problem(
        "Algebra", "Level 3",
        f"An arithmetic sequence starts {first}, {first + step}, {first + 2 * step}, ... What is the sum of its "
        f"first {n} terms?",
        f"The common difference is ${step}$, so term ${n}$ is ${first}+{n - 1}\\cdot {step}={last}$. The sum is the "
        f"number of terms times the average of the first and last: ${n}\\cdot\\frac{{{first}+{last}}}{{2}}=\\boxed{{{total}}}$.",
        ("Arithmetic sequences", "Series"),
        (("Sequences and their terms", "A sequence is an ordered list of numbers; the first term, the second term "
          "and so on are counted from the start."),
         ("Common difference", "In an arithmetic sequence each term is the previous one plus the same fixed amount, "
          "the common difference."),
         ("Average of two numbers", "The average of two numbers is their sum divided by two, the number halfway "
          "between them."),
         ("The general term", "Term number n of an arithmetic sequence is the first term plus n - 1 common "
          "differences: there are n - 1 steps from the first term."),
         ("Pairing first and last terms", "Adding the sequence forwards and backwards pairs terms with equal sums, so "
          "the sum is the number of terms times the average of the first and last."),
         ("Finding the last term", f"Term {n} is {first} plus {n - 1} steps of {step}, which is {last}."),
         ("Computing the sum", f"The sum is {n} times the average of {first} and {last}, that is {n} times "
          f"{Fraction(first + last, 2)}, giving {total}."),
         ("Counting steps versus terms", f"{n} terms have only {n - 1} gaps between them; counting {n} steps instead "
          "overshoots the last term by one difference.")),
        ((1, 4), (2, 4), (1, 5), (3, 5), (4, 6), (5, 7), (6, 7), (4, 8)),
    )  # fmt: skip


def two_draws(red: int, blue: int) -> Problem:
    """Two marbles drawn without replacement from ``red`` red and ``blue`` blue: P(both red)."""
    n = red + blue
    p = Fraction(red * (red - 1), n * (n - 1))
    return Problem(
        "Counting & Probability", "Level 3",
        f"A bag holds {red} red and {blue} blue marbles. Two marbles are drawn at random without replacement. What is "
        "the probability that both are red? Express your answer as a common fraction.",
        f"The first is red with probability $\\frac{{{red}}}{{{n}}}$; then {red - 1} of the {n - 1} marbles left are "
        f"red. So the probability is $\\frac{{{red}}}{{{n}}}\\cdot\\frac{{{red - 1}}}{{{n - 1}}}=\\boxed{{\\frac{{{p.numerator}}}{{{p.denominator}}}}}$.",
        ("Probability", "Counting"),
        (("Probability of equally likely outcomes", "When all outcomes are equally likely, the probability of an "
          "event is the number of favourable outcomes divided by the number of outcomes."),
         ("Simplifying fractions", "A fraction is simplified by dividing top and bottom by their greatest common "
          "divisor; its value does not change."),
         ("Drawing without replacement", "A marble that is drawn is not put back, so the second draw is from one "
          "marble fewer, and from one fewer of the drawn colour."),
         ("Conditional probability of the second draw", "The chance of the second marble being red depends on what "
          "the first draw took out of the bag."),
         ("Multiplication rule for successive events", "The probability that two events both happen is the first "
          "event's probability times the second's given the first."),
         ("The first draw", f"The first marble is red with probability {red} out of {n}, since {red} of the {n} "
          "marbles are red."),
         ("The second draw and the product", f"Given a red first marble, {red - 1} of the {n - 1} left are red; the "
          f"product {red}/{n} times {red - 1}/{n - 1} is {red * (red - 1)}/{n * (n - 1)}."),
         ("Writing the answer in lowest terms", f"Dividing top and bottom by their common divisor gives "
          f"{p.numerator}/{p.denominator}, the answer as a common fraction.")),
        ((1, 4), (3, 4), (1, 5), (4, 5), (1, 6), (4, 7), (5, 7), (6, 7), (7, 8)),
    )  # fmt: skip


__all__ = ["LEVELS", "Problem", "arithmetic_series", "consecutive", "markdowns", "rectangle", "right_triangle", "two_draws"]
