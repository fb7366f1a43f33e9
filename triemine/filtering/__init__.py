"""triemine.filtering"""
