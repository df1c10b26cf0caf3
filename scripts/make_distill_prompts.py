"""Compose the distillation prompt set specchat/distill/prompts.jsonl (seed 7).

    python scripts/make_distill_prompts.py [OUT]   # default: specchat/distill/prompts.jsonl

Templates x topics, written for this project; none is a prompt of the benchmark set
(specchat/_data/prompts.jsonl). Deterministic: tests/test_scripts.py checks that it
writes the shipped file byte for byte.
"""
import json, random, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
topics = ["photosynthesis","the water cycle","volcanoes","the moon's phases","vaccines","electric cars",
 "the stock market","recycling","the Roman Empire","solar panels","earthquakes","the human heart",
 "machine learning","bread baking","the internet","honey bees","climate change","the printing press",
 "rainbows","compound interest","coffee","the immune system","ocean tides","democracy",
 "the French Revolution","batteries","sleep","exercise","music theory","chess openings",
 "gardening","time zones","the periodic table","penguins","glaciers","DNA","airplanes",
 "public libraries","budgeting","meditation","the Olympic Games","video game design","coral reefs",
 "the Great Wall of China","microwave ovens","bicycles","mushrooms","electricity","gravity"]
chat_t = ["Explain {t} in simple terms.","What are the pros and cons of {t}?","Give me three interesting facts about {t}.",
 "How does {t} work?","Write a short paragraph about {t} for a school newsletter.","What should a beginner know about {t}?",
 "Can you describe {t} in two sentences?","Why do people care about {t}?"]
code_tasks = ["counts the vowels in a string","returns the largest number in a list","checks whether a number is prime",
 "reverses the words in a sentence","computes the factorial of n","merges two sorted lists","removes duplicates from a list",
 "converts Celsius to Fahrenheit","returns the n-th Fibonacci number","counts how often each word appears in a text",
 "checks whether two strings are anagrams","flattens a nested list","finds the second smallest element of a list",
 "capitalizes the first letter of every word","computes the average of a list of numbers","checks if a year is a leap year",
 "returns the greatest common divisor of two integers","sorts a list of dictionaries by a key","reads a file and prints its lines",
 "validates an email address with a regular expression","transposes a matrix","converts a binary string to an integer"]
langs = ["Python","Python","Python","JavaScript","Java","C","Rust","Go"]
code_t = ["Write a {l} function that {c}.","Show me {l} code that {c}, with a short explanation.","Implement a function in {l} that {c}."]
code_extra = ["Write a SQL query that finds the ten most recent orders in a table named orders.",
 "Write a SQL query that counts the customers in each city.","Write a bash one-liner that finds all .py files larger than 1 MB.",
 "Write a Python class named Queue with enqueue, dequeue and size methods.","Write a Python class for a bank account with deposit and withdraw methods.",
 "Explain what a Python list comprehension is, with an example.","What is the difference between a list and a tuple in Python?",
 "Write a regular expression that matches a US phone number.","Explain recursion with a short code example.",
 "Write an HTML page with a heading and a button.","Write a CSS rule that centers a div.","Explain what Big O notation means."]
sentences = ["A gentle breeze moved the curtains while the kettle began to whistle in the kitchen.",
 "Maria bought three apples, two loaves of bread and a bottle of olive oil at the market on Tuesday.",
 "The meeting has been moved from Monday at 10 am to Wednesday at 2 pm in room 4B.",
 "Our new office opens on March 3rd at 221 Baker Street, and parking is free for visitors.",
 "The train to Berlin leaves at 8:15 from platform 6 and arrives at 12:40.",
 "Dr. Chen and Professor Okafor published their results on river pollution in the spring.",
 "Please send the signed contract to legal@example.com before Friday, June 14.",
 "The recipe needs 200 grams of flour, 3 eggs, 100 ml of milk and a pinch of salt.",
 "Tom, Aisha and Luca finished the marathon in 3 hours, 3 hours 20 minutes and 4 hours.",
 "The library will be closed for renovation from July 1 to August 15.",
 "In 1969, Neil Armstrong and Buzz Aldrin walked on the Moon while Michael Collins orbited above.",
 "The package weighs 2.5 kilograms and costs 14 dollars to ship to Canada.",
 "Every Saturday the farmers' market sells fresh strawberries, goat cheese and sourdough bread.",
 "Samuel moved from Lisbon to Oslo in 2019 to work as a marine biologist."]
extract_t = ["Repeat the following text exactly: {s}","Copy this sentence word for word: {s}",
 "Extract all names of people from this text: {s}","List every number that appears in this text: {s}",
 "Summarize this in a few words: {s}","Rewrite this sentence in the passive voice: {s}",
 "Translate this sentence into simple English for a child: {s}","Turn this text into a bulleted list of facts: {s}",
 "What dates or times are mentioned here? {s}","Repeat this sentence twice: {s}"]
creative_things = ["a lighthouse keeper","a lost umbrella","the first snow of winter","a robot learning to paint",
 "an old oak tree","a city at night","a cat who wants to fly","a mountain village","a forgotten birthday","a time traveler",
 "autumn leaves","a tiny dragon","a rainy Monday","a friendship between a fox and a crow","the last day of summer"]
creative_t = ["Write a short poem about {x}.","Write the opening paragraph of a story about {x}.","Write a haiku about {x}.",
 "Write a limerick about {x}.","Describe {x} in vivid detail.","Write a short dialogue involving {x}."]
def math_prompt(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(100, 999)
    return rng.choice([f"What is {a} times {b}?", f"What is {c} plus {a}?", f"What is {c} minus {b}?",
        f"Solve for x: {a % 9 + 2}x + {b} = {c}.", f"If a shirt costs {a} dollars and is discounted by {b % 50 + 5} percent, what is the new price?",
        f"A train travels {c} kilometers in {a % 9 + 2} hours. What is its average speed?",
        f"What is {b} percent of {c}?", f"Is {c} an even or an odd number? Explain.",
        f"Tom has {a} marbles and gives {b % a + 1} to his friend. How many are left?",
        f"What is the area of a rectangle that is {a} cm long and {b} cm wide?",
        f"Convert {c} minutes into hours and minutes.", f"What is the square of {a}?",
        f"Round {c}.{b} to the nearest whole number.", f"What is the average of {a}, {b} and {c}?"])

def compose(rng: random.Random) -> list[tuple[str, str]]:
    """The prompts as (category, prompt), in their shipped order."""
    out = []
    for t in rng.sample(topics, len(topics)):
        for tpl in rng.sample(chat_t, 2):
            out.append(("chat", tpl.format(t=t)))
    for c in code_tasks:
        for tpl in rng.sample(code_t, 2):
            out.append(("code", tpl.format(l=rng.choice(langs), c=c)))
    out += [("code", p) for p in code_extra]
    for s in sentences:
        for tpl in rng.sample(extract_t, 4):
            out.append(("extract", tpl.format(s=s)))
    for x in creative_things:
        for tpl in rng.sample(creative_t, 3):
            out.append(("creative", tpl.format(x=x)))
    out += [("math", math_prompt(rng)) for _ in range(50)]
    rng.shuffle(out)
    return out


def main(argv: list[str]) -> None:
    out_path = Path(argv[0]) if argv else ROOT / "specchat/distill/prompts.jsonl"
    prompts = compose(random.Random(7))
    with open(out_path, "w") as f:
        for i, (cat, p) in enumerate(prompts):
            f.write(json.dumps({"id": f"d{i:03d}", "category": cat, "prompt": p}) + "\n")
    print(len(prompts))


if __name__ == "__main__":
    main(sys.argv[1:])
