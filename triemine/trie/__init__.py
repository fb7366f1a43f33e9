"""triemine.trie"""
