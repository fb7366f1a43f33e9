"""triemine.evaluation"""
