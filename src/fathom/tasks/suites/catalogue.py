"""The suites as data: each task's file, prompt template, answer budget and metric.

Prompts and budgets are the suites' own, word for word: LongBench's ``config/dataset2prompt.json`` and
``dataset2maxlen.json``, LongBench v2's ``prompts/0shot.txt`` (answers of 128 tokens, without chain of
thought), and InfiniteBench's ``src/prompt.py`` templates for open models (``yarn_mistral_templates``,
its default) with ``src/eval_utils.py``'s ``DATA_NAME_TO_MAX_NEW_TOKENS``. ``{context}`` marks the
document in every template; the suites truncate the middle of the whole filled prompt
(``truncation.py``).
"""

# The suites' Chinese prompts and punctuation are their own text: full-width marks are meant.
# ruff: noqa: RUF001

from __future__ import annotations

from dataclasses import dataclass

# Bump when a template, a budget, a metric or the way items become prompts changes.
SUITES_VERSION = 1

LONGBENCH, LONGBENCH_E = "longbench", "longbench-e"
LONGBENCH_V2, INFINITEBENCH = "longbench-v2", "infinitebench"
SUITE_NAMES = (LONGBENCH, LONGBENCH_E, LONGBENCH_V2, INFINITEBENCH)


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite. ``chat``: the run's chat template wraps the prompt (LongBench leaves it
    off its few-shot and code tasks, whose prompts are continuations). ``first_line``: only the
    answer's first line is graded (LongBench's trec, triviaqa, samsum, lsht)."""

    name: str  # as records and --suite-tasks name it
    file: str  # the official file it is read from, in the data folder
    template: str
    max_new_tokens: int
    metric: str  # a name of metrics.LONGBENCH_METRICS or infinite_metrics.INFINITE_METRICS
    chat: bool = True
    first_line: bool = False


_QA_PASSAGES = (
    "Answer the question based on the given passages. Only give me the answer and do not output any other "
    "words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given "
    "passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:"
)
_CODE = "Please complete the code given below. \n{context}"

# name: (template, max new tokens, metric, chat, first line)
_LONGBENCH: dict[str, tuple[str, int, str, bool, bool]] = {
    "narrativeqa": (
        "You are given a story, which can be either a novel or a movie script, and a question. Answer the "
        "question as concisely as you can, using a single phrase if possible. Do not provide any "
        "explanation.\n\nStory: {context}\n\nNow, answer the question based on the story as concisely as "
        "you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: {input}"
        "\n\nAnswer:",
        128,
        "qa_f1",
        True,
        False,
    ),
    "qasper": (
        "You are given a scientific article and a question. Answer the question as concisely as you can, "
        "using a single phrase or sentence if possible. If the question cannot be answered based on the "
        'information in the article, write "unanswerable". If the question is a yes/no question, answer '
        '"yes", "no", or "unanswerable". Do not provide any explanation.\n\nArticle: {context}\n\n Answer '
        "the question based on the above article as concisely as you can, using a single phrase or "
        "sentence if possible. If the question cannot be answered based on the information in the "
        'article, write "unanswerable". If the question is a yes/no question, answer "yes", "no", or '
        '"unanswerable". Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:',
        128,
        "qa_f1",
        True,
        False,
    ),
    "multifieldqa_en": (
        "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question "
        "based on the above text, only give me the answer and do not output any other words.\n\n"
        "Question: {input}\nAnswer:",
        64,
        "qa_f1",
        True,
        False,
    ),
    "multifieldqa_zh": (
        "阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，"
        "不要输出任何其他字词。\n\n问题：{input}\n回答：",
        64,
        "qa_f1_zh",
        True,
        False,
    ),
    "hotpotqa": (_QA_PASSAGES, 32, "qa_f1", True, False),
    "2wikimqa": (_QA_PASSAGES, 32, "qa_f1", True, False),
    "musique": (_QA_PASSAGES, 32, "qa_f1", True, False),
    "dureader": (
        "请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：",
        128,
        "rouge_zh",
        True,
        False,
    ),
    "gov_report": (
        "You are given a report by a government agency. Write a one-page summary of the report.\n\n"
        "Report:\n{context}\n\nNow, write a one-page summary of the report.\n\nSummary:",
        512,
        "rouge",
        True,
        False,
    ),
    "qmsum": (
        "You are given a meeting transcript and a query containing a question or instruction. Answer the "
        "query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the "
        "above meeting transcript in one or more sentences.\n\nQuery: {input}\nAnswer:",
        512,
        "rouge",
        True,
        False,
    ),
    "multi_news": (
        "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}"
        "\n\nNow, write a one-page summary of all the news.\n\nSummary:",
        512,
        "rouge",
        True,
        False,
    ),
    "vcsum": (
        "下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结：",
        512,
        "rouge_zh",
        True,
        False,
    ),
    "trec": (
        "Please determine the type of the question below. Here are some examples of questions.\n\n"
        "{context}\n{input}",
        64,
        "classification",
        False,
        True,
    ),
    "triviaqa": (
        "Answer the question based on the given passage. Only give me the answer and do not output any "
        "other words. The following are some examples.\n\n{context}\n\n{input}",
        32,
        "qa_f1",
        False,
        True,
    ),
    "samsum": (
        "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}"
        "\n\n{input}",
        128,
        "rouge",
        False,
        True,
    ),
    "lsht": (
        "请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}",
        64,
        "classification",
        False,
        True,
    ),
    "passage_count": (
        "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please "
        "carefully read these paragraphs and determine how many unique paragraphs there are after "
        "removing duplicates. In other words, how many non-repeating paragraphs are there in total?\n\n"
        "{context}\n\nPlease enter the final count of unique paragraphs after removing duplicates. The "
        "output format should only contain the number, such as 1, 2, 3, and so on.\n\nThe final answer is: ",
        32,
        "count",
        True,
        False,
    ),
    "passage_retrieval_en": (
        "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph "
        "the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter "
        'the number of the paragraph that the abstract is from. The answer format must be like "Paragraph '
        '1", "Paragraph 2", etc.\n\nThe answer is: ',
        32,
        "retrieval",
        True,
        False,
    ),
    "passage_retrieval_zh": (
        "以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要"
        '\n\n{input}\n\n请输入摘要所属段落的编号。答案格式必须是"段落1"，"段落2"等格式\n\n答案是：',
        32,
        "retrieval_zh",
        True,
        False,
    ),
    "lcc": (_CODE + "Next line of code:\n", 64, "code_sim", False, False),
    "repobench-p": (_CODE + "{input}Next line of code:\n", 64, "code_sim", False, False),
}
# LongBench-E: the tasks LongBench's pred.py runs with --e, read from their "_e" files.
_LONGBENCH_E = (
    "qasper",
    "multifieldqa_en",
    "hotpotqa",
    "2wikimqa",
    "gov_report",
    "multi_news",
    "trec",
    "triviaqa",
    "samsum",
    "passage_count",
    "passage_retrieval_en",
    "lcc",
    "repobench-p",
)

V2_TEMPLATE = (
    "Please read the following text and answer the question below.\n\n<text>\n{context}\n</text>\n\n"
    "What is the correct answer to this question: {question}\nChoices:\n(A) {choice_A}\n(B) {choice_B}\n"
    '(C) {choice_C}\n(D) {choice_D}\n\nFormat your response as follows: "The correct answer is (insert '
    'answer here)".'
)

_OPTIONS = "A. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}"
# name: (template, max new tokens, metric)
_INFINITE: dict[str, tuple[str, int, str]] = {
    "passkey": (
        "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. I "
        "will quiz you about the important information.\n\n{context}\n\n{input}\n\nThe pass key is",
        6,
        "passkey",
    ),
    "number_string": (
        "There is an important info hidden inside a lot of irrelevant text. Find it. I will quiz you "
        "about the important information there.\n\n{context}\n\n{input}\n\nThe sequence of digits is",
        12,
        "number_string",
    ),
    "kv_retrieval": (
        "Extract the value corresponding to the specified key in the JSON object below.\n\n{context}\n\n"
        "{input}",
        50,
        "kv_retrieval",
    ),
    "longbook_sum_eng": ("Summarize the book below.\n\n{context}\n\nSummary:", 1200, "rouge_lsum"),
    "longbook_choice_eng": (
        "Read the book and answer the question.\n\n{context}\n\nQuestion: {input}\n"
        + _OPTIONS
        + "\n\nThe letter of the correct answer is",
        40,
        "choice",
    ),
    "longbook_qa_eng": (
        "Read the book and answer the question. Be very concise in your answer.\n\n{context}\n\n"
        "Question: {input}\nAnswer:",
        40,
        "qa_f1",
    ),
    "longbook_qa_chn": ("阅读以下书籍然后回答问题。\n\n{context}\n\n问题：{input}\n答案：", 40, "qa_f1_zh"),
    "longdialogue_qa_eng": (
        "Below is a dialogue script where one random occurrence of a character name is replaced with "
        '"$$MASK$$", and you should try to guess who that character is.\n\n{context}\n\nThe name that has '
        "been replaced with $$MASK$$ is likely",
        40,
        "dialogue",
    ),
    "math_find": ("{prefix}\n\n{context}\n\n{input}", 3, "math_find"),
    "math_calc": (
        "Let us calculate the intermediate values of an expression.\n\nExpression: 1 + 3 + 4\nValues: "
        "[1, 4, 8]\n\nExpression: 8 - 3 + 2 - 4\nValues: [8, 5, 7, 3]\n\nExpression: {context}\nValues:",
        30000,
        "math_calc",
    ),
    "code_run": (
        "There is a function called {func} in the following Python code.\n\n{context}\n\nPlease compute "
        "the exact value of {func_call}. The value of {func_call} is",
        5,
        "code_run",
    ),
    "code_debug": (
        "Following is a Python code where exactly one of the functions/methods has a deliberate error that "
        "makes it crash.\n\n{context}\n\nOptions:\n" + _OPTIONS + "\n\nThe correct option is:",
        5,
        "code_debug",
    ),
}


def _longbench(suffix: str, names: tuple[str, ...]) -> dict[str, SuiteTask]:
    tasks = {}
    for name in names:
        template, budget, metric, chat, first = _LONGBENCH[name]
        tasks[name] = SuiteTask(name, f"{name}{suffix}.jsonl", template, budget, metric, chat, first)
    return tasks


SUITES: dict[str, dict[str, SuiteTask]] = {
    LONGBENCH: _longbench("", tuple(_LONGBENCH)),
    LONGBENCH_E: _longbench("_e", _LONGBENCH_E),
    # One task: the whole release is one file of multiple-choice items across domains.
    LONGBENCH_V2: {LONGBENCH_V2: SuiteTask(LONGBENCH_V2, "data.json", V2_TEMPLATE, 128, "choice")},
    INFINITEBENCH: {
        name: SuiteTask(name, f"{name}.jsonl", template, budget, metric)
        for name, (template, budget, metric) in _INFINITE.items()
    },
}
# The metrics each suite's tasks name are looked up in the suite's own table.
INFINITE_SUITES = frozenset({INFINITEBENCH})

# LongBench-E's length buckets, over its items' "length" (words, or characters for Chinese).
LONGBENCH_E_BUCKETS = ((4000, "0-4k"), (8000, "4-8k"))
LONGBENCH_E_LAST = "8k+"


def longbench_e_bucket(length: int) -> str:
    """LongBench's scorer_e bucket: below 4000, below 8000, else 8k+."""
    return next((name for bound, name in LONGBENCH_E_BUCKETS if length < bound), LONGBENCH_E_LAST)
