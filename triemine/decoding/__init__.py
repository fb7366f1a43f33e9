"""triemine.decoding"""
