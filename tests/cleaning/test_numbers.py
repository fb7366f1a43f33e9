"""The given-pairs judge's number check (triemine.judging.numbers) on hand-written pairs."""
import numpy as np
import pytest

from triemine.judging.numbers import (chinese_numeral, decades, number_match, number_matches,
                                       source_values, target_numbers)


@pytest.mark.parametrize("run,value", [
    ("三", 3), ("十", 10), ("十五", 15), ("二十一", 21), ("一百零八", 108), ("两千", 2000),
    ("万", 10 ** 4), ("五万", 5 * 10 ** 4), ("一万零五", 10005), ("三千五百万", 35 * 10 ** 6),
    ("两亿三千万", 230 * 10 ** 6), ("一万亿", 10 ** 12), ("二零一五", 2015)])
def test_chinese_numerals_are_read_as_values(run, value):
    assert chinese_numeral(run) == value


def test_a_character_that_is_no_numeral_is_refused():
    with pytest.raises(ValueError, match="not a Chinese numeral"):
        chinese_numeral("三个")


def test_source_values_read_digits_scales_and_characters():
    vals = source_values("５万人，2.5亿元，百分之五，30多万，十二点九米，1,200吨")
    # full-width 5 times 万; 2.5 times 亿; 百分之五 is 5 (not 100); 30 times 万 past 多;
    # a decimal in characters; a thousands separator
    for v in (50000, 2.5e8, 5, 300000, 12.9, 1200):
        assert float(v) in vals
    assert 100.0 not in vals


def test_target_numbers_take_scale_words():
    assert target_numbers("50,000 people, 2.5 million yuan, 5%") == [
        (50000.0,), (2.5, 2.5e6), (5.0,)]
    assert target_numbers("no numbers here") == []


@pytest.mark.parametrize("src,tgt,want", [
    ("约5万人参加。", "About 50,000 people took part.", 1.0),       # 万 = 10^4
    ("约5万人参加。", "About 60,000 people took part.", 0.0),       # changed
    ("有三个人。", "There are 3 people.", 1.0),                     # a numeral in characters
    ("有三个人。", "There are 4 people.", 0.0),
    ("增长百分之五。", "It grew by 5%.", 1.0),
    ("投资两千五百万元", "an investment of 25 million yuan", 1.0),
    ("投资两千五百万元", "an investment of 35 million yuan", 0.0),
    ("２０１５年１１月", "November 2015", 1.0),                       # full-width digits
    ("２０１５年１１月", "November 2016", 0.0),
    ("２０１５年１１月５日", "5 November 2016", 0.5),             # one of two changed
    ("二零一五年", "in 2015", 1.0),
    ("今天天气很好。", "The weather is fine today.", 1.0),          # no number: no evidence
    ("今天天气很好。", "It rained 3 days.", 0.0),                  # a number the source lacks
    ("到20世纪90年代末，", "By the late 1990s,", 1.0),              # a decade of a century
    ("到20世纪90年代末，", "By the late 1980s,", 0.0),
    ("二十世纪九十年代", "in the 1990s", 1.0),
    ("上世纪５０年代到６０年代早期", "the 1950s and early 1960s", 1.0),  # 60年代 alone too
])
def test_number_match_on_hand_written_pairs(src, tgt, want):
    assert number_match(src, tgt) == pytest.approx(want)


def test_number_matches_is_one_value_a_pair():
    got = number_matches(["有三个人。", "有三个人。"], ["3 people", "4 people"])
    assert got.dtype == np.float64
    assert got.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("text,want", [
    ("20世纪90年代末", "1990年代末"), ("二十世纪九十年代", "1990年代"),
    ("上世纪５０年代", "1950年代"), ("上个世纪八十年代", "1980年代"),
    ("19世纪00年代", "1800年代"),
    ("20世纪95年代", "20世纪95年代"),   # not a decade: left as it is
    ("0世纪90年代", "0世纪90年代"),
    ("20世纪初", "20世纪初"), ("九十年代", "九十年代"), ("no decade", "no decade")])
def test_decades_of_a_numbered_century_are_written_as_years(text, want):
    assert decades(text) == want
