"""Compose the second, larger distillation prompt set specchat/distill/prompts-more.jsonl (seed 11).

    python scripts/make_distill_prompts_more.py [OUT [BENCHMARK_SET]]
        # defaults: specchat/distill/prompts-more.jsonl, specchat/_data/prompts.jsonl

More topics and templates than make_distill_prompts.py, across the same five kinds of
request (chat, code, extraction/rewriting, creative writing, arithmetic); written for this
project. No prompt equals one of the benchmark set, which it reads to leave those out.
The shipped draft was trained on it (docs/distill.md). Deterministic: tests/test_scripts.py
checks that it writes the shipped file byte for byte.
"""
import json, random, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
topics = """photosynthesis|the water cycle|volcanoes|the moon's phases|vaccines|electric cars|the stock market|recycling|
the Roman Empire|solar panels|earthquakes|the human heart|machine learning|bread baking|the internet|honey bees|climate change|
the printing press|rainbows|compound interest|coffee|the immune system|ocean tides|democracy|the French Revolution|batteries|
sleep|exercise|music theory|chess openings|gardening|time zones|the periodic table|penguins|glaciers|DNA|airplanes|
public libraries|budgeting|meditation|the Olympic Games|video game design|coral reefs|the Great Wall of China|microwave ovens|
bicycles|mushrooms|electricity|gravity|black holes|the Renaissance|ancient Egypt|the solar system|wind turbines|nuclear power|
the human brain|dinosaurs|rain forests|deserts|the Amazon river|the Industrial Revolution|World War I|the Cold War|
the printing of money|inflation|credit cards|taxes|supply and demand|startups|remote work|job interviews|public speaking|
learning a new language|writing an essay|note taking|time management|procrastination|healthy breakfast|vitamins|hydration|
running a marathon|yoga|swimming|football|basketball|tennis|cycling safety|first aid|fire safety|home insulation|
composting|houseplants|dogs|cats|horses|whales|octopuses|elephants|butterflies|ants|spiders|bats|owls|
the speed of light|magnets|sound waves|thunderstorms|hurricanes|snowflakes|the northern lights|tectonic plates|
fossils|the Big Bang|Mars|Jupiter|satellites|GPS|smartphones|email|passwords|cloud computing|open source software|
databases|computer viruses|encryption|robots|3D printing|virtual reality|social media|podcasts|photography|
painting with watercolors|playing the guitar|jazz|classical music|the piano|opera|theater|poetry|novels|libraries|
museums|trains|ships|the Panama Canal|bridges|skyscrapers|roads|traffic lights|cities|villages|farming|tea|chocolate|
cheese making|pasta|rice|spices|vegetarian diets|food allergies|table manners|birthdays|weddings|holidays|camping|
hiking|maps|compasses|the metric system|calendars|clocks|the alphabet|handwriting|friendship|kindness|teamwork|
leadership|negotiation|saving money|renting an apartment|moving house|cooking on a budget|packing for a trip""".replace("\n", "").split("|")
chat_t = ["Explain {t} in simple terms.", "What are the pros and cons of {t}?", "Give me three interesting facts about {t}.",
 "How does {t} work?", "Write a short paragraph about {t} for a school newsletter.", "What should a beginner know about {t}?",
 "Can you describe {t} in two sentences?", "Why do people care about {t}?", "Tell me about {t}.",
 "What is the history of {t}? Keep it short.", "Give me five tips about {t}.", "Explain {t} to a seven-year-old.",
 "What are common misconceptions about {t}?", "Summarize what you know about {t} in one paragraph.",
 "What is the most important thing to understand about {t}?", "How would you teach {t} to a classmate?",
 "List the key terms related to {t} and define each briefly.", "What questions do people often ask about {t}?",
 "Is {t} good or bad for the environment? Explain briefly.", "Answer in one sentence: what is {t}?"]
questions = ["What is the capital of {c}? Answer in one sentence.", "What language is spoken in {c}?",
 "Name three famous foods from {c}.", "What is the weather usually like in {c}?", "Tell me one fact about the history of {c}."]
countries = ["France", "Italy", "Brazil", "Canada", "Kenya", "India", "Australia", "Mexico", "Egypt", "Norway", "Peru",
 "Vietnam", "Germany", "Spain", "Argentina", "South Korea", "Greece", "Morocco", "Ireland", "Thailand"]
howto = ["How do I make a cup of {x}?", "How do I clean {y}?", "Give me step-by-step instructions to {z}.",
 "What is the best way to {z}?", "What are the main differences between {a} and {b}?"]
drinks = ["black tea", "hot chocolate", "lemonade", "iced coffee", "mint tea", "a fruit smoothie", "espresso"]
things = ["a cast iron pan", "a laptop keyboard", "running shoes", "a bathroom mirror", "a wooden table", "a fish tank"]
tasks = ["change a bike tire", "plant tomatoes", "write a cover letter", "start a vegetable garden", "learn to juggle",
 "tie a tie", "study for an exam", "boil an egg", "organize a closet", "prepare for a job interview", "make pancakes",
 "set up a budget", "train a puppy", "back up my computer", "fall asleep faster"]
pairs = [("a lake", "a sea"), ("weather", "climate"), ("a virus", "bacteria"), ("a laptop", "a tablet"), ("tea", "coffee"),
 ("a frog", "a toad"), ("a crocodile", "an alligator"), ("RAM", "storage"), ("a novel", "a short story"),
 ("speed", "velocity"), ("an ocean", "a lake"), ("jam", "jelly"), ("a violin", "a viola"), ("rugby", "American football")]
code_tasks = """counts the vowels in a string|returns the largest number in a list|checks whether a number is prime|
reverses the words in a sentence|computes the factorial of n|merges two sorted lists|removes duplicates from a list|
converts Celsius to Fahrenheit|returns the n-th Fibonacci number|counts how often each word appears in a text|
checks whether two strings are anagrams|flattens a nested list|finds the second smallest element of a list|
capitalizes the first letter of every word|computes the average of a list of numbers|checks if a year is a leap year|
returns the greatest common divisor of two integers|sorts a list of dictionaries by a key|reads a file and prints its lines|
validates an email address with a regular expression|transposes a matrix|converts a binary string to an integer|
returns the sum of the digits of a number|finds the longest word in a sentence|checks whether a list is sorted|
counts the words in a string|returns the minimum and maximum of a list|converts a string to title case|
removes all spaces from a string|returns the product of a list of numbers|finds the index of an element in a list|
checks whether a string contains only digits|computes the power of a number without using the built-in operator|
returns the odd numbers from a list|multiplies two matrices|implements binary search|implements bubble sort|
counts the characters in a file|converts kilometers to miles|returns a dictionary of letter frequencies|
generates a random password|checks whether parentheses in a string are balanced|rotates a list by k positions|
returns the intersection of two lists|computes the median of a list|converts a number to Roman numerals|
returns the first n prime numbers|joins a list of strings with commas|squares every number in a list""".replace("\n", "").split("|")
langs = ["Python"] * 5 + ["JavaScript", "JavaScript", "Java", "C", "C++", "Rust", "Go", "TypeScript", "Ruby"]
code_t = ["Write a {l} function that {c}.", "Show me {l} code that {c}, with a short explanation.",
 "Implement a function in {l} that {c}.", "Write a short {l} program that {c}.", "In {l}, how do I write a function that {c}?"]
classes = ["Queue with enqueue, dequeue and size methods", "BankAccount with deposit, withdraw and balance methods",
 "Rectangle with area and perimeter methods", "Counter with increment, decrement and reset methods",
 "TodoList with add, remove and list methods", "Point with a method that returns the distance to another point",
 "Temperature that converts between Celsius and Fahrenheit", "Student with a name and a list of grades and an average method"]
sql = ["selects all products cheaper than 10 dollars from a table named products",
 "counts the customers in each city from a table named customers", "finds the ten most recent orders in a table named orders",
 "returns the average salary per department from a table named employees", "deletes all rows older than 2020 from a table named logs",
 "joins a table of orders with a table of customers on customer_id", "finds duplicate email addresses in a table named accounts"]
bash = ["finds all .py files larger than 1 MB", "counts the files in the current folder", "prints the ten largest files in a folder",
 "replaces every tab with four spaces in a file", "shows the last 20 lines of a log file", "lists all running python processes"]
concepts = ["a list comprehension", "recursion", "a hash map", "Big O notation", "a closure", "an API", "a class and an object",
 "a for loop", "exception handling", "a linked list", "version control with git", "unit testing", "a REST API", "JSON"]
sentences = """A gentle breeze moved the curtains while the kettle began to whistle in the kitchen.|
Maria bought three apples, two loaves of bread and a bottle of olive oil at the market on Tuesday.|
The meeting has been moved from Monday at 10 am to Wednesday at 2 pm in room 4B.|
Our new office opens on March 3rd at 221 Baker Street, and parking is free for visitors.|
The train to Berlin leaves at 8:15 from platform 6 and arrives at 12:40.|
Dr. Chen and Professor Okafor published their results on river pollution in the spring.|
Please send the signed contract to legal@example.com before Friday, June 14.|
The recipe needs 200 grams of flour, 3 eggs, 100 ml of milk and a pinch of salt.|
The library will be closed for renovation from July 1 to August 15.|
The package weighs 2.5 kilograms and costs 14 dollars to ship to Canada.|
Samuel moved from Lisbon to Oslo in 2019 to work as a marine biologist.|
The school choir will perform at the town hall on Friday evening at seven.|
Anna planted roses, tulips and sunflowers along the fence behind her house.|
The hotel offers free breakfast, a swimming pool and a shuttle to the airport.|
Our team won the regional chess tournament after five long rounds on Sunday.|
The museum is open from 9 am to 5 pm every day except Monday, and entry costs 12 euros.|
Jonas forgot his keys at the office, so he waited for his sister at the cafe downstairs.|
The new phone has a larger screen, a faster processor and a battery that lasts two days.|
Heavy rain is expected tomorrow morning, followed by sunshine in the afternoon.|
The bakery on Elm Street sells croissants, bagels and blueberry muffins until noon.|
Lena, Omar and Priya will present the project to the board next Thursday.|
The concert starts at 8 pm, but the doors open one hour earlier.|
Mount Everest is 8,849 meters tall and lies on the border between Nepal and China.|
The bus from the airport to the city center takes 40 minutes and costs 6 dollars.""".replace("\n", "").split("|")
typos = ["I recieved you're mesage yesterdy and will anwser soon.", "The resturant was to crowded so we went some where else.",
 "She dont like to wake up erly on weekends.", "Their going to the libary after lunch too study.",
 "My freind baught a new bycicle last weak.", "We was suposed to meat at the park at noon."]
lists = ["red, orange, yellow, green, blue, indigo, violet", "Monday, Tuesday, Wednesday, Thursday, Friday",
 "carrots, potatoes, onions, peppers, tomatoes", "lion, tiger, bear, wolf, fox, deer", "January, February, March, April, May, June",
 "Paris, London, Rome, Madrid, Berlin, Vienna", "hammer, screwdriver, wrench, pliers, saw"]
records = ["Name is Tom Baker, age is 41, city is Leeds.", "Title is The Hobbit, author is J. R. R. Tolkien, year is 1937.",
 "Product is desk lamp, price is 25 dollars, color is black.", "Name is Sofia Rossi, job is nurse, city is Turin.",
 "Team is Red Lions, wins is 12, losses is 4.", "Course is Biology 101, teacher is Ms. Park, room is 12."]
snippets = ["def add(a, b):\n    total = a + b\n    return total", "for i in range(3):\n    print(i)",
 "x = [1, 2, 3]\ny = [n * 2 for n in x]\nprint(y)", "def greet(name):\n    message = 'Hello, ' + name\n    return message"]
extract_t = ["Repeat the following text exactly: {s}", "Copy this sentence word for word: {s}",
 "Extract all names of people from this text: {s}", "List every number that appears in this text: {s}",
 "Summarize this in a few words: {s}", "Rewrite this sentence in the passive voice: {s}",
 "Translate this sentence into simple English for a child: {s}", "Turn this text into a bulleted list of facts: {s}",
 "What dates or times are mentioned here? {s}", "Repeat this sentence twice: {s}", "Summarize in one sentence: {s}",
 "Write this sentence again in all capital letters: {s}", "Rewrite this more formally: {s}",
 "Which places are mentioned in this text? {s}", "Rewrite the following sentence without changing its meaning: {s}"]
creative_things = """a lighthouse keeper|a lost umbrella|the first snow of winter|a robot learning to paint|an old oak tree|
a city at night|a cat who wants to fly|a mountain village|a forgotten birthday|a time traveler|a tiny dragon|a rainy Monday|
a friendship between a fox and a crow|the last day of summer|the sea at dawn|a brave little mouse|a haunted library|
a talking teapot|a spaceship crew|a secret garden|a clumsy wizard|a snowman who fears spring|a busy train station|
a grandmother's kitchen|the desert at noon|a pirate who hates water|a lonely star|a school trip gone wrong|
a dog who finds a treasure|a forest in spring|a river that talks|a baker who can't smell|a penguin in the city|
an astronaut's first day|a magic pencil|a storm at sea|a sleepy owl|a street musician|a new neighbor""".replace("\n", "").split("|")
creative_t = ["Write a short poem about {x}.", "Write the opening paragraph of a story about {x}.", "Write a haiku about {x}.",
 "Write a limerick about {x}.", "Describe {x} in vivid detail.", "Write a short dialogue involving {x}.",
 "Tell me a short story about {x}.", "Describe {x} in three sentences.", "Write four lines of rhyming verse about {x}.",
 "Write a children's bedtime story about {x}."]
businesses = ["bakery", "bookshop", "bike repair shop", "tea house", "yoga studio", "pet store", "food truck", "flower shop"]

def math_prompt(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(100, 999)
    return rng.choice([f"What is {a} times {b}?", f"What is {a} multiplied by {b % 12 + 2}? Show your steps.",
        f"What is {c} plus {a}?", f"What is {c} minus {b}?", f"Solve for x: {a % 9 + 2}x + {b} = {c}.",
        f"If a shirt costs {a} dollars and is discounted by {b % 50 + 5} percent, what is the new price?",
        f"A jacket costs {c % 200 + 20} dollars and is on sale for {rng.choice([10, 20, 25, 30, 50])} percent off. What is the sale price?",
        f"A train travels {c} kilometers in {a % 9 + 2} hours. What is its average speed?",
        f"If a car travels {a} miles per hour for {b % 6 + 2} hours, how far does it go?",
        f"What is {b} percent of {c}?", f"Is {c} an even or an odd number? Explain.",
        f"Tom has {a} marbles and gives {b % a + 1} to his friend. How many are left?",
        f"What is the area of a rectangle that is {a} cm long and {b} cm wide?",
        f"Explain how to compute the area of a circle with radius {a % 12 + 1}.",
        f"Explain how to compute the perimeter of a square with side {a}.",
        f"Convert {c} minutes into hours and minutes.", f"What is the square of {a}?",
        f"Convert {c % 120} degrees Fahrenheit to Celsius.", f"Convert {a} degrees Celsius to Fahrenheit.",
        f"What is the next number in the sequence {a % 5 + 1}, {2 * (a % 5 + 1)}, {3 * (a % 5 + 1)}, {4 * (a % 5 + 1)}?",
        f"What is the next number in the sequence {a % 4 + 1}, {(a % 4 + 1) * 3}, {(a % 4 + 1) * 9}?",
        f"Round {c}.{b} to the nearest whole number.", f"What is the average of {a}, {b} and {c}?",
        f"Divide {c} by {a % 9 + 2} and give the remainder.", f"How many seconds are in {a % 12 + 1} hours?"])


def compose(rng: random.Random, benchmark: Path | None = None) -> list[tuple[str, str]]:
    """The prompts as (category, prompt), in their shipped order."""
    out = []
    for t in topics:
        for tpl in rng.sample(chat_t, 4):
            out.append(("chat", tpl.format(t=t)))
    for c in countries:
        for tpl in rng.sample(questions, 3):
            out.append(("chat", tpl.format(c=c)))
    for _ in range(120):
        a, b = rng.choice(pairs)
        out.append(("chat", rng.choice(howto).format(x=rng.choice(drinks), y=rng.choice(things), z=rng.choice(tasks), a=a, b=b)))
    for c in code_tasks:
        for tpl in rng.sample(code_t, 3):
            out.append(("code", tpl.format(l=rng.choice(langs), c=c)))
    for k in classes:
        out += [("code", f"Write a Python class named {k}."), ("code", f"Write a {rng.choice(langs[5:])} class named {k}.")]
    out += [("code", f"Write a SQL query that {q}.") for q in sql]
    out += [("code", f"Write a bash command that {q}.") for q in bash]
    out += [("code", rng.choice(["Explain what {x} is, with an example.", "What is {x} in programming?",
                                  "Explain {x} with a short code example."]).format(x=x)) for x in concepts for _ in range(2)]
    for s in sentences:
        for tpl in rng.sample(extract_t, 6):
            out.append(("extract", tpl.format(s=s)))
    for s in typos:
        out += [("extract", f"Fix the spelling in this sentence and write it again: {s}"),
                ("extract", f"Correct the grammar and spelling: {s}")]
    for items in lists:
        out += [("extract", f"Here is a list: {items}. Write the same list again, one item per line."),
                ("extract", f"Sort this list alphabetically: {items}."), ("extract", f"Number each item of this list: {items}.")]
    for r in records:
        out += [("extract", f"Convert this to JSON: {r}"), ("extract", f"Turn this into a table with two columns, key and value: {r}")]
    for s in snippets:
        out += [("extract", f"Copy this code and add a comment above each line:\n\n{s}"),
                ("extract", f"Explain what this code does, line by line:\n\n{s}"), ("extract", f"Repeat this code exactly:\n\n{s}")]
    for x in creative_things:
        for tpl in rng.sample(creative_t, 5):
            out.append(("creative", tpl.format(x=x)))
    for b in businesses:
        out += [("creative", f"Invent a name and a slogan for a new {b}."), ("creative", f"Write a short advertisement for a {b}.")]
    out += [("math", math_prompt(rng)) for _ in range(400)]
    out = list(dict.fromkeys(out))
    if benchmark is not None and benchmark.exists():
        taken = {json.loads(line)["prompt"] for line in benchmark.read_text().splitlines() if line.strip()}
        out = [(cat, p) for cat, p in out if p not in taken]
    rng.shuffle(out)
    return out


def main(argv: list[str]) -> None:
    out_path = Path(argv[0]) if argv else ROOT / "specchat/distill/prompts-more.jsonl"
    benchmark = Path(argv[1]) if len(argv) > 1 else ROOT / "specchat/_data/prompts.jsonl"
    prompts = compose(random.Random(11), benchmark)
    with open(out_path, "w") as f:
        for i, (cat, p) in enumerate(prompts):
            f.write(json.dumps({"id": f"m{i:04d}", "category": cat, "prompt": p}) + "\n")
    print(len(prompts))


if __name__ == "__main__":
    main(sys.argv[1:])
