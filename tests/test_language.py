"""One script-based judgement of a text's language, shared by the proxy and ``clean``."""

from hypothesis import given
from hypothesis import strategies as st

from looprescue.dsh.prune import pick_language
from looprescue.language import text_language
from looprescue.rescue.conversation import conversation_language

CHINESE = "请把这个函数改成异步的，并且补上单元测试。"
JAPANESE = "この関数を非同期に書き換えて、単体テストを追加してください。"
# Japanese with few kana: the ideographs outnumber the kana five to one and more.
JAPANESE_DENSE = "東京都内在住会社員山田太郎氏、昨年度売上報告書提出済みです。"
KOREAN = "이 함수를 비동기로 바꾸고 단위 테스트를 추가해 주세요."
KOREAN_HANJA = "大韓民國 憲法 第一條 대한민국은 민주공화국이다."


def test_chinese_is_zh_and_english_is_en():
    assert text_language(CHINESE) == "zh"
    assert text_language("Please make this function async and add unit tests.") == "en"
    # a Chinese prompt quoting code and file names stays Chinese
    assert text_language("把 `src/looprescue/proxy/server.py` 里的 handle_request 改成异步") == "zh"
    # a stray katakana loanword does not make Chinese Japanese
    assert text_language("我们用 ゲーム 这个词来说明电子游戏的历史和发展过程。") == "zh"


def test_japanese_and_korean_never_get_chinese():
    for text in (JAPANESE, JAPANESE_DENSE, KOREAN, KOREAN_HANJA):
        assert text_language(text) == "en", text
        assert pick_language(text) == "en", text


def test_a_japanese_conversation_gets_english_notes():
    body = {"messages": [{"role": "user", "content": JAPANESE}]}
    assert conversation_language(body) == "en"
    body = {"messages": [{"role": "user", "content": CHINESE}]}
    assert conversation_language(body) == "zh"


def test_no_letters_is_english():
    assert text_language("") == "en"
    assert text_language("1234 ... ??? 。。。") == "en"


MIXED = "的一是了我人在有他这ののはをがアイウ한국어abc .。，1"


@given(st.text(alphabet=st.sampled_from(MIXED), max_size=80))
def test_proxy_and_clean_agree(text):
    assert pick_language(text) == text_language(text)


def test_a_quoted_chinese_name_keeps_english():
    assert text_language("Please translate 你好 into English for the greeting screen.") == "en"
    assert text_language("用 pytest 跑 tests/test_proxy_server.py 然后修复 failing tests") == "zh"
