"""triemine.models"""
